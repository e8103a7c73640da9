"""Git access through one wrapper (DESIGN.md layer 3)."""
