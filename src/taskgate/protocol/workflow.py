"""Workflow variants by risk and change type (RULES §2): the single source of state paths."""

from __future__ import annotations

from types import MappingProxyType

from taskgate.protocol.states import ChangeType, RiskLevel, State

VARIANTS = MappingProxyType(  # R-RSK-13 (derived mapping)
    {RiskLevel.HIGH: "FULL", RiskLevel.MEDIUM: "ABBREVIATED", RiskLevel.LOW: "STREAMLINED"}
)

# D-WFV-3 (Res C-07/C-08/C-09): every path holds both human checkpoints, the plan approval in
# SYNTHESIS and the change review in AWAITING_USER_APPROVAL.
_BASE_PATH = (State.INIT, State.CLASSIFIED, State.REQUIREMENTS, State.SYNTHESIS)
FULL_PATH: tuple[State, ...] = (
    *_BASE_PATH, State.IMPLEMENTATION, State.VALIDATION, State.REVIEW,
    State.AWAITING_USER_APPROVAL, State.COMPLETE, State.CLEANUP,
)  # fmt: skip
SKIP_PATH: tuple[State, ...] = (
    *_BASE_PATH, State.AWAITING_USER_APPROVAL, State.COMPLETE, State.CLEANUP,
)  # fmt: skip

_SKIPPABLE = (ChangeType.DOCUMENTATION_ONLY, ChangeType.CONFIG_ONLY)


def state_path(risk: RiskLevel | None, change_type: ChangeType | None) -> tuple[State, ...]:
    """The workflow variant's states for a risk and change type (D-WFV-1, D-WFV-3)."""
    if risk == RiskLevel.LOW:
        return SKIP_PATH  # R-WFV-04
    if risk == RiskLevel.MEDIUM and change_type in _SKIPPABLE:
        return SKIP_PATH  # R-WFV-02, C-09
    return FULL_PATH  # R-WFV-01/03/05; R-WFV-07: a change type never shortens HIGH
