"""taskgate.dataclass_lite against the real dataclasses (issue 18): every behaviour the project's
records rely on is compared with a dataclass of the same fields, and the transition's command
path is checked to import no `dataclasses` at all."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any, ClassVar

import pytest

from taskgate import dataclass_lite as lite


def _make(dc: Any, field: Any, frozen: bool = True) -> tuple[type[Any], type[Any]]:
    """The same two classes, made by `dc`/`field` (qualnames equal whichever makes them)."""

    @dc(frozen=frozen)
    class Row:
        """A row."""

        name: str
        count: int
        tags: tuple[str, ...] = ()
        extra: dict[str, Any] = field(default_factory=dict)
        note: str = field(default="n", compare=False)
        hidden: str = field(default="h", repr=False)

        @property
        def twice(self) -> int:
            return self.count * 2

    @dc(frozen=frozen)
    class Sub(Row):
        more: int = 0

    return Row, Sub


REAL = _make(dataclasses.dataclass, dataclasses.field)
LITE = _make(lite.dataclass, lite.field)
CALLS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    (("a", 1), {}),
    (("a",), {"count": 2}),
    ((), {"count": 3, "name": "b", "extra": {"k": [1]}}),
    (("a", 1, ("x",), {"y": 1}, "note", "hid"), {}),
    ((), {"name": "c", "count": 0, "note": "other"}),
]
BAD_CALLS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    ((), {}),
    (("a",), {}),
    (("a", 1), {"name": "b"}),
    (("a", 1), {"nope": 1}),
    (("a", 1, (), {}, "n", "h", "too many"), {}),
]


def _outcome(cls: type[Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    try:
        obj = cls(*args, **kwargs)
    except TypeError as exc:
        return ("TypeError", str(exc).replace(cls.__qualname__ + ".", ""))
    return (repr(obj), vars(obj), list(vars(obj)))


@pytest.mark.parametrize("which", [0, 1])
@pytest.mark.parametrize(("args", "kwargs"), CALLS + BAD_CALLS)
def test_construction_matches_dataclasses(
    which: int, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    real, ours = REAL[which], LITE[which]
    assert _outcome(ours, args, kwargs) == _outcome(real, args, kwargs)


def test_factories_give_each_instance_its_own_value() -> None:
    row = LITE[0]
    a, b = row("a", 1), row("b", 2)
    assert a.extra == {} and a.extra is not b.extra
    assert "extra" not in row.__dict__ and row.tags == ()  # as dataclasses leaves the class


def test_equality_and_hash_match_dataclasses() -> None:
    for real, ours in zip(REAL, LITE, strict=True):
        pairs = [(real(*a, **k), ours(*a, **k)) for a, k in CALLS]
        for r1, o1 in pairs:
            for r2, o2 in pairs:
                assert (o1 == o2) == (r1 == r2)
                assert (o1 != o2) == (r1 != r2)
            assert _hash_outcome(o1) == _hash_outcome(r1)  # a dict field: unhashable in both
    for real, ours in zip(REAL, LITE, strict=True):  # hashable with a tuple in `extra`
        for a, k in [c for c in CALLS if len(c[0]) < 4]:
            r, o = real(*a, **{**k, "extra": ()}), ours(*a, **{**k, "extra": ()})
            assert hash(o) == hash(ours(*_args(o, ours))) and isinstance(hash(r), int)
    row = LITE[0]
    assert row("a", 1, note="x") == row("a", 1, note="y")  # compare=False
    assert hash(row("a", 1, (), (), "x")) == hash(row("a", 1, (), (), "y"))
    assert row("a", 1) != LITE[1]("a", 1)  # another class is never equal
    assert row("a", 1).__eq__(("a", 1)) is NotImplemented
    assert len({row("a", 1, extra=()), row("a", 1, extra=()), row("b", 1, extra=())}) == 2


def _hash_outcome(obj: Any) -> Any:
    try:
        return hash(obj) * 0
    except TypeError as exc:
        return str(exc)


def _args(obj: Any, cls: type[Any]) -> list[Any]:
    return [getattr(obj, n) for n in lite.field_names(cls)]


def test_frozen_refuses_assignment_like_dataclasses() -> None:
    for real, ours in zip(REAL, LITE, strict=True):
        for cls in (real, ours):
            obj = cls("a", 1)
            with pytest.raises(
                dataclasses.FrozenInstanceError, match="cannot assign to field 'name'"
            ):
                obj.name = "b"
            with pytest.raises(AttributeError):
                obj.other = 1
            with pytest.raises(dataclasses.FrozenInstanceError):
                del obj.count
            assert obj.name == "a" and obj.count == 1


def test_not_frozen_is_mutable_and_unhashable() -> None:
    real, _ = _make(dataclasses.dataclass, dataclasses.field, frozen=False)
    ours, _ = _make(lite.dataclass, lite.field, frozen=False)
    for cls in (real, ours):
        obj = cls("a", 1)
        obj.name = "b"
        assert obj == cls("b", 1)
        with pytest.raises(TypeError, match="unhashable"):
            hash(obj)


def test_dataclasses_functions_work_on_lite_classes() -> None:
    for real, ours in zip(REAL, LITE, strict=True):
        r, o = (
            real("a", 1, ("t",), {"k": [1, {"z": 2}]}),
            ours("a", 1, ("t",), {"k": [1, {"z": 2}]}),
        )
        assert dataclasses.is_dataclass(ours) and dataclasses.is_dataclass(o)
        assert [(f.name, f.type, f.init, f.repr, f.compare) for f in dataclasses.fields(o)] == [
            (f.name, f.type, f.init, f.repr, f.compare) for f in dataclasses.fields(r)
        ]
        assert dataclasses.asdict(o) == dataclasses.asdict(r)
        assert dataclasses.astuple(o) == dataclasses.astuple(r)
        assert repr(dataclasses.replace(o, count=5)) == repr(dataclasses.replace(r, count=5))
        assert repr(lite.replace(o, count=5, name="z")) == repr(
            dataclasses.replace(r, count=5, name="z")
        )
        assert lite.field_names(ours) == tuple(f.name for f in dataclasses.fields(real))
        with pytest.raises(TypeError):
            lite.replace(o, nope=1)


def test_a_real_dataclass_may_extend_a_lite_one() -> None:
    @dataclasses.dataclass(frozen=True)
    class Real(LITE[0]):  # type: ignore[misc, valid-type]
        last: int = 9

    assert (
        repr(Real("a", 1)) == "test_a_real_dataclass_may_extend_a_lite_one.<locals>.Real("
        "name='a', count=1, tags=(), extra={}, note='n', last=9)"
    )


def test_replace_of_something_else_falls_back_to_dataclasses() -> None:
    r = REAL[0]("a", 1)
    assert lite.replace(r, count=2) == REAL[0]("a", 2)
    assert lite.field_names(REAL[1]) == tuple(f.name for f in dataclasses.fields(REAL[1]))


def test_pickle_copy_and_match() -> None:
    for ours in LITE:
        obj = ours("a", 1, ("t",), {"k": 1})
        for clone in (copy.copy(obj), copy.deepcopy(obj)):
            assert clone == obj and clone is not obj
        assert ours.__match_args__ == tuple(f.name for f in dataclasses.fields(ours))
        match obj:
            case ours(name, count):  # type: ignore[misc]
                assert (name, count) == ("a", 1)
            case _:
                pytest.fail("no match")
    from taskgate.store.records import EventRow, TaskRow

    row = TaskRow("t", "INIT", "s", "h", 1, "a", "b", extra={"x": 1})
    assert pickle.loads(pickle.dumps(row)) == row
    event = EventRow("t", "a", "k", {}, "p", "h", 3)
    assert pickle.loads(pickle.dumps(event)) == event
    assert row.with_changes(state="CLASSIFIED").state == "CLASSIFIED"


def test_post_init_and_methods_of_the_body_are_kept() -> None:
    seen: list[Any] = []

    @lite.dataclass(frozen=True)
    class Checked:
        value: int

        def __post_init__(self) -> None:
            seen.append(self.value)

        def __repr__(self) -> str:
            return "mine"

    assert repr(Checked(3)) == "mine" and seen == [3]


def test_declarations_refused_like_dataclasses_or_not_supported() -> None:
    with pytest.raises(ValueError, match="mutable default"):

        @lite.dataclass
        class Bad:
            items: list[int] = []  # noqa: RUF012

    with pytest.raises(TypeError, match="non-default argument"):

        @lite.dataclass
        class Order:
            a: int = 1
            b: int  # type: ignore[misc]

    for options in ({"order": True}, {"slots": True}, {"kw_only": True}, {"unsafe_hash": True}):
        with pytest.raises(NotImplementedError):
            lite.dataclass(**options)(type("X", (), {"__annotations__": {"a": "int"}}))
    with pytest.raises(NotImplementedError):
        lite.field(metadata={"a": 1})

    @lite.dataclass(frozen=True)
    class WithClassVar:
        a: int
        b: ClassVar[int] = 3

    assert lite.field_names(WithClassVar) == ("a",) and WithClassVar(1).b == 3


def test_the_package_records_are_lite_and_keep_their_fields() -> None:
    from taskgate.engine.config import Config
    from taskgate.protocol.facts import TaskFacts
    from taskgate.store import records

    for cls in (records.TaskRow, records.EventRow, records.TaskSnapshot, TaskFacts, Config):
        assert "__record_spec__" in cls.__dict__, cls
        assert lite.field_names(cls) == tuple(f.name for f in dataclasses.fields(cls))
