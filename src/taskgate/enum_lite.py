"""`enum.StrEnum` for the command path without importing `enum` (issue 18, fifth pass).

Importing `enum` is about 0.8 ms of CPU on CPython 3.11 and creating a StrEnum about 0.1 ms
more per class: 1.5 ms of a 26 ms `taskgate transition`, for the protocol's six enums (State,
Checkpoint, RiskLevel, ChangeType, AgentStatus, Decision), and nothing else on that path
imports `enum` since `re` left it.

For mypy this module *is* `enum` (StrEnum is re-exported under TYPE_CHECKING), so the classes
keep their exact enum typing (members, exhaustiveness, `.value`). At run time StrEnum is a
base class whose metaclass builds the members of a class statement the way `enum` does for a
StrEnum: each member a `str` of its value and an instance of its class, with `name`,
`value`, `_name_`, `_value_`; the class iterable in definition order, `len`, `in` (a member,
or TypeError for anything else, as 3.11 says), `Cls(value)` (the member, or ValueError
"'x' is not a valid Cls"), `Cls[name]`, `__members__`, aliases for a repeated value, members
that cannot be reassigned or deleted; `repr` `<Cls.NAME: 'value'>`, `str` and `format` the
value's, the value's hash, pickling and copying as the member itself. Methods, class
methods and properties the class body defines are kept. The one difference: a member is not
an `enum.Enum` instance (nothing in taskgate asks). tests/test_enum_lite.py compares every
behaviour above with `enum.StrEnum` classes of the same members.

On a Python other than 3.11 (whose enum it copies) StrEnum is `enum.StrEnum` itself.

Only what the project uses is supported: `auto()`, the functional API (`StrEnum("N", ...)`),
`_missing_`, `_ignore_` and subclassing a class that has members raise, never a silently
different class.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING or sys.version_info[:2] != (3, 11):
    # The behaviours below are 3.11's (3.12 changed `in`, for one): on any other version the
    # classes are plain enum.StrEnums rather than a copy of another version's semantics.
    from enum import StrEnum as StrEnum
else:

    def _is_member(name, value):
        """What enum makes a member: a name without a leading underscore bound to something
        that is not a descriptor (functions, properties, class methods are). Other names with
        one are refused unless they are dunder names or descriptors (enum's rules for them
        differ: sunder names are reserved, private and single-underscore ones vary)."""
        if hasattr(value, "__get__") or hasattr(value, "__set__") or hasattr(value, "__delete__"):
            return False
        if name[:1] != "_":
            return True
        if len(name) > 4 and name[:2] == name[-2:] == "__":
            return False
        raise NotImplementedError(f"{name}: use enum")

    class _EnumType(type):
        """The metaclass: builds the members, answers the class-level operations."""

        def __new__(mcls, name, bases, namespace, **kwargs):
            if not any(isinstance(base, _EnumType) for base in bases):
                return super().__new__(mcls, name, bases, namespace, **kwargs)
            for base in bases:
                if isinstance(base, _EnumType) and base._member_names_:
                    raise TypeError(
                        f"<enum {name!r}> cannot extend <enum {base.__name__!r}>"
                    )  # enum's message for the same mistake
            unsupported = {"_missing_", "_ignore_", "_generate_next_value_"} & set(namespace)
            if unsupported:
                raise NotImplementedError(f"{sorted(unsupported)}: use enum")
            members = [(k, v) for k, v in namespace.items() if _is_member(k, v)]
            body = {k: v for k, v in namespace.items() if not _is_member(k, v)}
            cls = super().__new__(mcls, name, bases, body, **kwargs)
            member_map = {}
            value_map = {}
            names = []
            for key, value in members:
                if type(value).__name__ == "auto":
                    raise NotImplementedError("auto(): use enum")
                if not isinstance(value, str):
                    raise TypeError(f"{value!r} is not a string")
                value = str(value)
                member = value_map.get(value)
                if member is None:  # an alias otherwise, as enum makes one
                    member = str.__new__(cls, value)
                    member._value_ = value
                    member._name_ = key
                    member.__objclass__ = cls
                    member._sort_order_ = len(names)
                    value_map[value] = member
                    names.append(key)
                member_map[key] = member
                type.__setattr__(cls, key, member)
            type.__setattr__(cls, "_member_map_", member_map)
            type.__setattr__(cls, "_member_names_", names)
            type.__setattr__(cls, "_value2member_map_", value_map)
            type.__setattr__(cls, "_unhashable_values_", [])
            return cls

        def __call__(cls, value, *args, **kwargs):
            if args or kwargs or not cls._member_names_:
                raise NotImplementedError("the functional API: use enum")
            if type(value) is cls:
                return value
            try:
                return cls._value2member_map_[value]
            except KeyError:
                pass
            except TypeError:  # unhashable: compared with every value, as enum does
                for member in cls._value2member_map_.values():
                    if member._value_ == value:
                        return member
            raise ValueError(f"{value!r} is not a valid {cls.__qualname__}")

        def __getitem__(cls, name):
            return cls._member_map_[name]

        def __iter__(cls):
            return (cls._member_map_[name] for name in cls._member_names_)

        def __reversed__(cls):
            return (cls._member_map_[name] for name in reversed(cls._member_names_))

        def __len__(cls):
            return len(cls._member_names_)

        def __bool__(cls):
            return True

        def __contains__(cls, member):
            if not isinstance(member, StrEnum):
                import warnings

                warnings.warn(
                    "in 3.12 __contains__ will no longer raise TypeError, but will return True "
                    "or\nFalse depending on whether the value is a member or the value of a "
                    "member",
                    DeprecationWarning,
                    stacklevel=2,
                )
                raise TypeError(
                    f"unsupported operand type(s) for 'in': '{type(member).__qualname__}' and "
                    f"'{type(cls).__qualname__}'"
                )
            return isinstance(member, cls) and member._name_ in cls._member_map_

        @property
        def __members__(cls):
            from types import MappingProxyType

            return MappingProxyType(cls._member_map_)

        def __repr__(cls):
            return f"<enum {cls.__name__!r}>"

        def __setattr__(cls, name, value):
            if name in cls.__dict__.get("_member_map_", {}):
                raise AttributeError(f"cannot reassign member {name!r}")
            super().__setattr__(name, value)

        def __delattr__(cls, name):
            if name in cls.__dict__.get("_member_map_", {}):
                raise AttributeError(f"{cls.__name__!r} cannot delete member {name!r}.")
            super().__delattr__(name)

    _EnumType.__qualname__ = _EnumType.__name__ = "EnumType"

    class StrEnum(str, metaclass=_EnumType):
        """`enum.StrEnum` for the classes the project defines (see the module doc)."""

        _member_names_: tuple[str, ...] = ()  # a class with members has its own list

        def __repr__(self):
            return f"<{self.__class__.__name__}.{self._name_}: {self._value_!r}>"

        __str__ = str.__str__
        __format__ = str.__format__
        __hash__ = str.__hash__

        def __reduce_ex__(self, protocol):
            return self.__class__, (self._value_,)

        def __copy__(self):
            return self

        def __deepcopy__(self, memo):
            return self

        @property
        def name(self):
            """The member's name."""
            return self._name_

        @property
        def value(self):
            """The member's value."""
            return self._value_
