"""Pure protocol rules: no I/O, no clock, no subprocess (DESIGN.md layer 1)."""
