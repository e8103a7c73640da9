"""Agent backends: one agent, one mode, one worktree (DESIGN.md §Agents; docs/agents.md).

The orchestrator needs three names: `build_request` and `invoke` (taskgate.agents.invoke) and
`parse_agents_config` (taskgate.agents.config); the types are in taskgate.agents.base.
"""
