"""Application services combining protocol, store and git (DESIGN.md layer 4)."""
