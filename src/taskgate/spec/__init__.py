"""The specification workflow (seed 003, RULES §18): a clarification loop that writes
`specs/NNN-name/spec.md` with its author and resumes after any crash.

Modules: `state` (the workflow state, its integrity check and atomic save), `index` (index.md,
rendered from state), `agents` (the spec roles and the scripted backend), `loop` (phases A1..A5,
loop B1..B5, C), `detect` (resume detection).
"""
