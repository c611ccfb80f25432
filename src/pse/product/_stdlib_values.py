"""The fixed table of standard-library value types that cross the channel by value, and how each is
taken apart into plain fields and rebuilt from them: the `["std", name, ...]` nodes of
`pse.product._values`. A type joins or leaves here without the codec changing; the codec hands each
entry what it needs of itself (`Contents`, `Fill`) for a type that holds other values.

Only the *exact* types of the table are named (a subclass is the policy's), and a type is there only if
its module was loaded already: nothing here imports a module to look a value up. Standard library only
(the product process loads this module).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from pse.product._node_fields import as_int, exactly, hex_int, text

__all__ = ["Contents", "Fill", "std_fields", "std_name", "std_value"]

Contents = Callable[[Any], Any]
"""The codec's content node of a plain list or dict (its items encoded, in the current exchange)."""
Fill = Callable[[Any, object], None]
"""The codec's decoding of a content node into an empty plain list or dict (in the current exchange)."""

_STD_TYPES = {
    "decimal.Decimal": ("decimal", "Decimal"),
    "fractions.Fraction": ("fractions", "Fraction"),
    "datetime.date": ("datetime", "date"),
    "datetime.time": ("datetime", "time"),
    "datetime.datetime": ("datetime", "datetime"),
    "datetime.timedelta": ("datetime", "timedelta"),
    "uuid.UUID": ("uuid", "UUID"),
    "pathlib.PurePosixPath": ("pathlib", "PurePosixPath"),
    "pathlib.PosixPath": ("pathlib", "PosixPath"),
    "collections.OrderedDict": ("collections", "OrderedDict"),
    "collections.Counter": ("collections", "Counter"),
    "collections.deque": ("collections", "deque"),
}


def std_name(value: object) -> str | None:
    """The table's name of `value`'s exact type, when it is one (never imports: a type in the table is
    there only if its module was loaded already)."""
    kind = type(value)
    name = f"{getattr(kind, '__module__', '')}.{getattr(kind, '__qualname__', '')}"
    where = _STD_TYPES.get(name)
    if where is None or getattr(sys.modules.get(where[0]), where[1], None) is not kind:
        return None
    if name.startswith("datetime.") and getattr(value, "tzinfo", None) is not None:
        return None  # a time zone is its own object: the value goes as a handle
    return name


def std_fields(name: str, value: Any, contents: Contents) -> list[Any]:
    """The fields that follow `name` in the node of `value` (whose type `std_name` named)."""
    return _STD_ENCODE[name](value, contents)


def std_value(rest: list[Any], fill: Fill) -> object:
    """Rebuild the value of a `["std", *rest]` node (its name, then its fields), or raise ValueError."""
    if not rest or type(rest[0]) is not str or rest[0] not in _STD_DECODE:
        raise ValueError("an unknown standard-library type")
    return _STD_DECODE[rest[0]](rest[1:], fill)


def _std_type(name: str) -> Any:
    module, attribute = _STD_TYPES[name]
    return getattr(__import__(module), attribute)


_STD_ENCODE: dict[str, Callable[[Any, Contents], list[Any]]] = {
    "decimal.Decimal": lambda v, c: [str(v)],
    "fractions.Fraction": lambda v, c: [format(v.numerator, "x"), format(v.denominator, "x")],
    "datetime.date": lambda v, c: [v.isoformat()],
    "datetime.time": lambda v, c: [v.isoformat()],
    "datetime.datetime": lambda v, c: [v.isoformat()],
    "datetime.timedelta": lambda v, c: [v.days, v.seconds, v.microseconds],
    "uuid.UUID": lambda v, c: [v.hex],
    "pathlib.PurePosixPath": lambda v, c: [str(v)],
    "pathlib.PosixPath": lambda v, c: [str(v)],
    "collections.OrderedDict": lambda v, c: [c(dict(v))],
    "collections.Counter": lambda v, c: [c(dict(v))],
    "collections.deque": lambda v, c: [c(list(v)), v.maxlen],
}


def _std_pairs(name: str) -> Callable[[list[Any], Fill], object]:
    def build(rest: list[Any], fill: Fill) -> object:
        (pairs,) = exactly(rest, 1)
        plain: dict[Any, Any] = {}
        fill(plain, pairs)
        return _std_type(name)(plain)

    return build


def _std_deque(rest: list[Any], fill: Fill) -> object:
    items, maxlen = exactly(rest, 2)
    plain: list[Any] = []
    fill(plain, items)
    if maxlen is not None and type(maxlen) is not int:
        raise ValueError("a deque's maxlen is not an int")
    return _std_type("collections.deque")(plain, maxlen)


def _std_text(name: str, build: Callable[[Any, str], object]) -> Callable[[list[Any], Fill], object]:
    return lambda rest, fill: build(_std_type(name), text(rest))


def _std_fraction(rest: list[Any], fill: Fill) -> object:
    numerator, denominator = exactly(rest, 2)
    return _std_type("fractions.Fraction")(hex_int([numerator]), hex_int([denominator]))


def _std_timedelta(rest: list[Any], fill: Fill) -> object:
    days, seconds, micro = (as_int(v) for v in exactly(rest, 3))
    return _std_type("datetime.timedelta")(days=days, seconds=seconds, microseconds=micro)


_STD_DECODE: dict[str, Callable[[list[Any], Fill], object]] = {
    "decimal.Decimal": _std_text("decimal.Decimal", lambda kind, s: kind(s)),
    "fractions.Fraction": _std_fraction,
    "datetime.date": _std_text("datetime.date", lambda kind, s: kind.fromisoformat(s)),
    "datetime.time": _std_text("datetime.time", lambda kind, s: kind.fromisoformat(s)),
    "datetime.datetime": _std_text("datetime.datetime", lambda kind, s: kind.fromisoformat(s)),
    "datetime.timedelta": _std_timedelta,
    "uuid.UUID": _std_text("uuid.UUID", lambda kind, s: kind(hex=s)),
    "pathlib.PurePosixPath": _std_text("pathlib.PurePosixPath", lambda kind, s: kind(s)),
    "pathlib.PosixPath": _std_text("pathlib.PosixPath", lambda kind, s: kind(s)),
    "collections.OrderedDict": _std_pairs("collections.OrderedDict"),
    "collections.Counter": _std_pairs("collections.Counter"),
    "collections.deque": _std_deque,
}
