"""The coordinating "main agent": `taskgate run` and `taskgate demo` (DESIGN.md layer 5)."""
