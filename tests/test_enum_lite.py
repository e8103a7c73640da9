"""taskgate/enum_lite.py (issue 18, fifth pass): a StrEnum made there behaves as `enum.StrEnum`
with the same class body -- members, lookups, errors, repr/str/format, hashing, pickling and
copying, the class-level operations -- and the protocol's enums are exactly the members they
were."""

from __future__ import annotations

import copy
import enum
import pickle
import warnings

import pytest

from taskgate import enum_lite
from taskgate.protocol import states, states_extra


class RealColor(enum.StrEnum):
    RED = "RED"
    GREEN = "GREEN"
    LIGHT = "light-blue"
    ALSO_RED = "RED"  # an alias

    @classmethod
    def parse(cls, text: str) -> RealColor:
        return cls(text.strip().upper())

    @property
    def rank(self) -> int:
        return {"RED": 0, "GREEN": 1}.get(self.value, 2)


class LiteColor(enum_lite.StrEnum):
    RED = "RED"
    GREEN = "GREEN"
    LIGHT = "light-blue"
    ALSO_RED = "RED"  # an alias

    @classmethod
    def parse(cls, text: str) -> LiteColor:
        return cls(text.strip().upper())

    @property
    def rank(self) -> int:
        return {"RED": 0, "GREEN": 1}.get(self.value, 2)


class RealOther(enum.StrEnum):
    RED = "RED"


class LiteOther(enum_lite.StrEnum):
    RED = "RED"


OPERATIONS = {
    "iterate": lambda C, D: list(C),
    "reversed": lambda C, D: list(reversed(C)),
    "len": lambda C, D: len(C),
    "bool": lambda C, D: bool(C),
    "repr class": lambda C, D: repr(C),
    "members": lambda C, D: dict(C.__members__),
    "member names": lambda C, D: list(C.__members__),
    "call value": lambda C, D: C("GREEN"),
    "call alias value": lambda C, D: C("RED"),
    "call member": lambda C, D: C(C.GREEN),
    "call other enum's member": lambda C, D: C(D.RED),
    "call missing": lambda C, D: C("blue"),
    "call lower": lambda C, D: C("green"),
    "call unhashable": lambda C, D: C(["RED"]),
    "call int": lambda C, D: C(1),
    "call none": lambda C, D: C(None),
    "getitem": lambda C, D: C["LIGHT"],
    "getitem alias": lambda C, D: C["ALSO_RED"],
    "getitem missing": lambda C, D: C["light-blue"],
    "alias is canonical": lambda C, D: C.ALSO_RED is C.RED,
    "attribute": lambda C, D: C.LIGHT,
    "name value": lambda C, D: (C.LIGHT.name, C.LIGHT.value, C.LIGHT._name_, C.LIGHT._value_),
    "alias name": lambda C, D: C.ALSO_RED.name,
    "repr": lambda C, D: repr(C.LIGHT),
    "str": lambda C, D: str(C.LIGHT),
    "format": lambda C, D: (f"{C.LIGHT}", f"{C.RED:>6}|", format(C.GREEN, "")),
    "percent": lambda C, D: "%s %r" % (C.RED, C.RED),  # noqa: UP031
    "hash": lambda C, D: (hash(C.LIGHT) == hash("light-blue"), hash(C.RED) == hash("RED")),
    "eq": lambda C, D: (C.RED == "RED", C.RED == D.RED, C.RED != "GREEN", C.RED == C.ALSO_RED),
    "order": lambda C, D: sorted(C),
    "dict key": lambda C, D: ({"RED": 1}.get(C.RED), {C.LIGHT: 2}.get("light-blue")),
    "isinstance": lambda C, D: (isinstance(C.RED, str), isinstance(C.RED, C), type(C.RED) is C),
    "str methods": lambda C, D: (C.LIGHT.upper(), C.RED + "!", C.LIGHT.split("-"), len(C.RED)),
    "exact str": lambda C, D: type(str(C.RED)) is str,
    "contains member": lambda C, D: (C.RED in C, C.ALSO_RED in C),
    "contains other member": lambda C, D: D.RED in C,
    "contains str": lambda C, D: "RED" in C,
    "classmethod": lambda C, D: C.parse(" green "),
    "classmethod error": lambda C, D: C.parse("blue"),
    "property": lambda C, D: [c.rank for c in C],
    "pickle": lambda C, D: [
        pickle.loads(pickle.dumps(C.LIGHT, protocol)) is C.LIGHT for protocol in range(6)
    ],
    "copy": lambda C, D: (copy.copy(C.RED) is C.RED, copy.deepcopy([C.RED])[0] is C.RED),
    "reduce": lambda C, D: C.GREEN.__reduce_ex__(4)[1],
    "reassign": lambda C, D: setattr(C, "RED", "x"),
    "delete": lambda C, D: delattr(C, "GREEN"),
    "objclass": lambda C, D: C.RED.__objclass__ is C,
    "member map": lambda C, D: (C._member_names_, dict(C._member_map_), C._value2member_map_),
    "json": lambda C, D: __import__("json").dumps({C.RED: [C.LIGHT]}),
    "match": lambda C, D: [_match(c, C) for c in ("RED", C.GREEN, "x")],
}


def _match(value: object, C: type) -> str:
    match value:
        case C.RED:  # type: ignore[attr-defined]
            return "red"
        case C.GREEN:  # type: ignore[attr-defined]
            return "green"
        case _:
            return "other"


def outcome(operation: object, C: type, D: type) -> tuple[str, str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = operation(C, D)  # type: ignore[operator]
        except Exception as exc:
            text = (type(exc).__name__, str(exc), repr(exc.__context__), repr(exc.__cause__))
            found = (*text, [(w.category.__name__, str(w.message)) for w in caught])
            return "error", repr(found).replace("Real", "").replace("Lite", "")
    found = (result, [(w.category.__name__, str(w.message)) for w in caught])
    return "value", repr(found).replace("Real", "").replace("Lite", "")


@pytest.mark.parametrize("name", list(OPERATIONS))
def test_a_lite_str_enum_behaves_as_enums(name: str) -> None:
    operation = OPERATIONS[name]
    assert outcome(operation, LiteColor, LiteOther) == outcome(operation, RealColor, RealOther)


def test_the_protocol_enums_have_the_members_they_had() -> None:
    """Each is the enum.StrEnum of the same names and values, in the same order."""
    enums = [states.State, states.Checkpoint, states_extra.RiskLevel, states_extra.ChangeType,
             states_extra.AgentStatus, states_extra.Decision]  # fmt: skip
    for lite in enums:
        real = enum.StrEnum(lite.__name__, [(m.name, m.value) for m in lite])  # type: ignore[misc]
        assert [(m.name, m.value) for m in lite] == [(m.name, m.value) for m in real]
        for member in lite:
            assert repr(member) == repr(real(member.value)) and str(member) == member.value
            assert lite(member.value) is member and lite[member.name] is member
    assert states.State.parse(" review ") is states.State.REVIEW
    assert states_extra.RiskLevel.parse("low").rank == 0


def test_what_enum_lite_does_not_build_is_refused() -> None:
    with pytest.raises(NotImplementedError):

        class Auto(enum_lite.StrEnum):
            A = enum.auto()  # type: ignore[assignment]

    with pytest.raises(NotImplementedError):

        class Sunder(enum_lite.StrEnum):
            _ignore_ = "x"

    with pytest.raises(TypeError):

        class NotStr(enum_lite.StrEnum):
            A = 1  # type: ignore[assignment]

    with pytest.raises(TypeError):

        class Extends(LiteOther):  # type: ignore[misc]
            B = "B"
