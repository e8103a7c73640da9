"""`@dataclass` for the command path without importing `dataclasses` (issue 18).

Creating a class with `dataclasses.dataclass` compiles six generated methods with `exec` and
imports `inspect` (with it ast, dis, tokenize): about 20 ms of a 60 ms `taskgate transition`
went to the 28 record classes on its path. The decorator here builds the same methods as
closures over one description of the fields, so defining a class costs a few microseconds.

For mypy this module *is* `dataclasses` (the names are re-exported under TYPE_CHECKING), so
the classes keep strict, precise typing: constructor signatures, frozenness, `replace`.

At run time a class made here behaves like the frozen (or plain) dataclass it replaces:
`__init__` (positional and keyword arguments, defaults, `field(default_factory=...)`,
`__post_init__`), `__repr__`, `__eq__` (same class only), `__hash__` (frozen: over the
compared fields; eq without frozen: unhashable), assignment refused with
`dataclasses.FrozenInstanceError`, `__match_args__`, pickling and copying. Methods the class
body defines itself are kept, as dataclasses keeps them. `dataclasses.fields`, `replace`,
`asdict`, `astuple` and `is_dataclass` work on these classes too: `__dataclass_fields__` is
built (importing `dataclasses`) the first time something asks for it. tests/test_dataclass_lite.py
compares every behaviour with a real dataclass of the same fields.

Only the options the project uses are supported (`frozen`, `eq`, `repr`, `init`; `field` with
`default`, `default_factory`, `init`, `repr`, `compare`, `hash`); anything else raises
NotImplementedError at class creation, never a silently different class.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from dataclasses import dataclass as dataclass
    from dataclasses import field as field
    from dataclasses import replace as replace
    from typing import Any
else:
    from operator import attrgetter as _attrgetter

    _MISSING = object()

    class _Field:
        """What `field(...)` returns: read once by the decorator, then discarded."""

        __slots__ = ("compare", "default", "default_factory", "hash", "init", "repr")

        def __init__(self, default, default_factory, init, repr, hash, compare):
            self.default = default
            self.default_factory = default_factory
            self.init = init
            self.repr = repr
            self.hash = hash
            self.compare = compare

    def field(
        *, default=_MISSING, default_factory=_MISSING, init=True, repr=True, hash=None,
        compare=True, metadata=None, kw_only=_MISSING,
    ):  # fmt: skip
        """`dataclasses.field` for the options the project uses."""
        if default is not _MISSING and default_factory is not _MISSING:
            raise ValueError("cannot specify both default and default_factory")
        if metadata is not None or kw_only is not _MISSING:
            raise NotImplementedError("field(metadata=, kw_only=): use dataclasses")
        return _Field(default, default_factory, init, repr, hash, compare)

    class _Spec:
        """The fields of one class, in definition order (bases first)."""

        __slots__ = ("factories", "fields", "frozen", "names", "params", "types")

        def __init__(self, fields, types, frozen, params):
            self.fields = fields  # name -> _Field
            self.types = types  # name -> annotation (a string under PEP 563)
            self.frozen = frozen
            self.params = params  # (init, repr, eq), for __dataclass_params__
            self.names = tuple(fields)
            self.factories = {
                n: f.default_factory for n, f in fields.items() if f.default_factory is not _MISSING
            }

    class _LazyDataclassFields:
        """`cls.__dataclass_fields__`, built with `dataclasses` the first time it is read."""

        def __get__(self, obj, owner):
            cache = owner.__dict__.get("__record_fields_cache__")
            if cache is not None:
                return cache
            import dataclasses

            spec = owner.__record_spec__
            out = {}
            for name, f in spec.fields.items():
                real = dataclasses.field(
                    default=dataclasses.MISSING if f.default is _MISSING else f.default,
                    default_factory=(
                        dataclasses.MISSING
                        if f.default_factory is _MISSING
                        else f.default_factory
                    ),
                    init=f.init, repr=f.repr, hash=f.hash, compare=f.compare,
                )  # fmt: skip
                real.name = name
                real.type = spec.types[name]
                real._field_type = dataclasses._FIELD
                real.kw_only = False
                out[name] = real
            type.__setattr__(owner, "__record_fields_cache__", out)
            return out

    class _LazyDataclassParams:
        """`cls.__dataclass_params__` (a dataclass extending one of these classes reads it)."""

        def __get__(self, obj, owner):
            import dataclasses

            spec = owner.__record_spec__
            init, repr_, eq = spec.params
            try:  # Python 3.12+ adds match_args, kw_only, slots, weakref_slot
                return dataclasses._DataclassParams(
                    init, repr_, eq, False, False, spec.frozen, True, False, False, False
                )
            except TypeError:
                return dataclasses._DataclassParams(init, repr_, eq, False, False, spec.frozen)

    _CLASSVAR_PREFIXES = ("ClassVar", "typing.ClassVar", "t.ClassVar")
    _UNSUPPORTED_PREFIXES = ("InitVar", "dataclasses.InitVar", "KW_ONLY", "dataclasses.KW_ONLY")

    def _is_classvar(annotation):
        text = annotation if isinstance(annotation, str) else repr(annotation)
        if text.startswith(_UNSUPPORTED_PREFIXES):
            raise NotImplementedError(f"{text}: use dataclasses")
        return text.startswith(_CLASSVAR_PREFIXES)

    def _collect(cls, frozen):
        fields = {}
        types = {}
        for base in reversed(cls.__mro__[1:]):
            if "__dataclass_fields__" in base.__dict__ and "__record_spec__" not in base.__dict__:
                raise NotImplementedError(f"{cls.__name__}: a dataclasses base; use dataclasses")
            spec = base.__dict__.get("__record_spec__")
            if spec is not None:
                if spec.frozen != frozen:
                    raise TypeError("cannot inherit frozen dataclass from a non-frozen one")
                fields.update(spec.fields)
                types.update(spec.types)
        for name, annotation in cls.__dict__.get("__annotations__", {}).items():  # noqa: RUF063
            plain = isinstance(annotation, str) and "Var" not in annotation
            if not (plain and "KW_ONLY" not in annotation) and _is_classvar(annotation):
                continue
            value = cls.__dict__.get(name, _MISSING)
            if isinstance(value, _Field):
                f = value
                if f.default is _MISSING:
                    delattr(cls, name)
                else:
                    setattr(cls, name, f.default)
            else:
                f = _Field(value, _MISSING, True, True, None, True)
            if f.default is not _MISSING and f.default.__class__.__hash__ is None:
                raise ValueError(
                    f"mutable default {type(f.default)} for field {name} is not allowed: "
                    "use default_factory"
                )
            fields[name] = f  # a redefined field keeps its base's position, as in dataclasses
            types[name] = annotation
        return fields, types

    def _make_init(cls, spec):
        init_names = []
        defaults = {}
        n_required = 0
        for n, f in spec.fields.items():
            if f.default is not _MISSING:
                defaults[n] = f.default
            if not f.init:
                continue
            if f.default is _MISSING and f.default_factory is _MISSING:
                if n_required < len(init_names):
                    raise TypeError(f"non-default argument {n!r} follows default argument")
                n_required += 1
            init_names.append(n)
        init_names = tuple(init_names)
        init_set = frozenset(init_names)
        names = spec.names
        n_init = len(init_names)
        n_all = len(names)
        factories = spec.factories
        takes = (
            f"{n_init + 1}" if n_required == n_init else f"from {n_required + 1} to {n_init + 1}"
        )
        post_init = getattr(cls, "__post_init__", None)
        qualname = cls.__qualname__
        set_dict = object.__setattr__

        def __init__(self, *args, **kwargs):
            if len(args) > n_init:
                raise TypeError(
                    f"{qualname}.__init__() takes {takes} positional arguments but "
                    f"{len(args) + 1} were given"
                )
            values = dict(zip(init_names, args, strict=False))
            if kwargs:
                for key in kwargs:
                    if key not in init_set:
                        raise TypeError(
                            f"{qualname}.__init__() got an unexpected keyword argument {key!r}"
                        )
                    if key in values:
                        raise TypeError(
                            f"{qualname}.__init__() got multiple values for argument {key!r}"
                        )
                values.update(kwargs)
            if kwargs or len(values) != n_all:
                ordered = {}
                missing = []
                for n in names:
                    if n in values and n in init_set:
                        ordered[n] = values[n]
                    elif n in defaults:
                        ordered[n] = defaults[n]
                    elif n in factories:
                        ordered[n] = factories[n]()
                    else:
                        missing.append(n)
                if missing:
                    listed = " and ".join(", ".join(repr(m) for m in missing).rsplit(", ", 1))
                    plural = "s" if len(missing) > 1 else ""
                    raise TypeError(
                        f"{qualname}.__init__() missing {len(missing)} required positional "
                        f"argument{plural}: {listed}"
                    )
                values = ordered
            set_dict(self, "__dict__", values)
            if post_init is not None:
                post_init(self)

        __init__.__qualname__ = f"{qualname}.__init__"
        return __init__

    def _key(names):
        if not names:
            return lambda obj: ()
        if len(names) == 1:
            name = names[0]
            return lambda obj: (getattr(obj, name),)
        return _attrgetter(*names)

    def _frozen_error(name):
        from dataclasses import FrozenInstanceError

        return FrozenInstanceError(f"cannot assign to field {name!r}")

    def _build(cls, init, repr_, eq, frozen):
        fields, types = _collect(cls, frozen)
        spec = _Spec(fields, types, frozen, (init, repr_, eq))
        own = cls.__dict__
        cls.__record_spec__ = spec
        cls.__dataclass_fields__ = _LazyDataclassFields()
        cls.__dataclass_params__ = _LazyDataclassParams()
        if init and "__init__" not in own:
            cls.__init__ = _make_init(cls, spec)
        shown, compared, hashed_names, matched = [], [], [], []
        for n, f in fields.items():
            if f.repr:
                shown.append(n)
            if f.compare:
                compared.append(n)
            if f.compare if f.hash is None else f.hash:
                hashed_names.append(n)
            if f.init:
                matched.append(n)
        shown = tuple(shown)
        if repr_ and "__repr__" not in own:

            def __repr__(self):
                inner = ", ".join([f"{n}={getattr(self, n)!r}" for n in shown])
                return f"{self.__class__.__qualname__}({inner})"

            __repr__.__qualname__ = f"{cls.__qualname__}.__repr__"
            cls.__repr__ = __repr__
        explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
        if eq and "__eq__" not in own:
            key = _key(tuple(compared))

            def __eq__(self, other):
                if other.__class__ is self.__class__:
                    return key(self) == key(other)
                return NotImplemented

            __eq__.__qualname__ = f"{cls.__qualname__}.__eq__"
            cls.__eq__ = __eq__
        if eq and frozen and not explicit_hash:
            hashed = _key(tuple(hashed_names))

            def __hash__(self):
                return hash(hashed(self))

            __hash__.__qualname__ = f"{cls.__qualname__}.__hash__"
            cls.__hash__ = __hash__
        elif eq and not frozen and not explicit_hash:
            cls.__hash__ = None
        if frozen:
            field_set = frozenset(fields)

            def __setattr__(self, name, value):
                if type(self) is cls or name in field_set:
                    raise _frozen_error(name)
                super(cls, self).__setattr__(name, value)

            def __delattr__(self, name):
                if type(self) is cls or name in field_set:
                    raise _frozen_error(name)
                super(cls, self).__delattr__(name)

            if "__setattr__" in own or "__delattr__" in own:
                raise TypeError(f"cannot overwrite attribute __setattr__ in class {cls.__name__}")
            cls.__setattr__ = __setattr__
            cls.__delattr__ = __delattr__
        if "__match_args__" not in own:
            cls.__match_args__ = tuple(matched)
        if not cls.__doc__:
            cls.__doc__ = f"{cls.__name__}({', '.join(spec.names)})"
        return cls

    def dataclass(
        cls=None, /, *, init=True, repr=True, eq=True, order=False, unsafe_hash=False,
        frozen=False, match_args=True, kw_only=False, slots=False, weakref_slot=False,
    ):  # fmt: skip
        """`dataclasses.dataclass` for the options the project uses (see the module doc)."""
        if order or unsafe_hash or kw_only or slots or weakref_slot or not match_args:
            raise NotImplementedError(
                "dataclass(order=, unsafe_hash=, kw_only=, slots=, match_args=): use dataclasses"
            )

        def wrap(c):
            return _build(c, init, repr, eq, frozen)

        return wrap if cls is None else wrap(cls)

    def replace(obj, /, **changes):
        """`dataclasses.replace`, without importing dataclasses for the classes made here."""
        spec = getattr(type(obj), "__record_spec__", None)
        if spec is None:
            import dataclasses

            return dataclasses.replace(obj, **changes)
        for name, f in spec.fields.items():
            if not f.init:
                if name in changes:
                    raise ValueError(
                        f"field {name} is declared with init=False, it cannot be specified "
                        "with replace()"
                    )
                continue
            if name not in changes:
                changes[name] = getattr(obj, name)
        return obj.__class__(**changes)


def field_names(cls: type[Any]) -> tuple[str, ...]:
    """The field names of a class made here or by dataclasses, in order, without importing
    dataclasses for the former (`tuple(f.name for f in dataclasses.fields(cls))`)."""
    spec = cls.__dict__.get("__record_spec__")
    if spec is not None:
        names: tuple[str, ...] = spec.names
        return names
    import dataclasses

    return tuple(f.name for f in dataclasses.fields(cls))
