"""Stand-ins: classes made in the check's process for the product's subclasses of built-ins and exceptions.

A product's exception class becomes a class here whose bases are the stand-ins of its bases, down to
Python's own exception classes (so `pytest.raises(mod.MyError)` and `except ValueError` work as in a
plain run); an instance of the product's subclass of a built-in (`list`, `int`, a namedtuple, an
`IntEnum` member) becomes an instance of a class here on that built-in, holding the plain value read
from the built-in's own storage: its comparisons, hashing and iteration are the built-in's, never the
product's. Both keep a Remote of the product's object: any attribute this process does not have is
asked of the product. The product names the classes and their bases; it cannot name a class of this
process but Python's built-ins, so no stand-in is one of pytest's outcomes or anything else of here.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

from pse.product._remote import Remote

__all__ = ["BASES", "StandIns"]

BASES: tuple[type, ...] = (int, float, complex, str, bytes, bytearray, list, tuple, dict, set, frozenset)
"""The built-ins a product's subclass instance is rebuilt on."""
_IMMUTABLE = (int, float, complex, str, bytes, tuple, frozenset)
_KEPT = 10_000
"""Most stand-in values kept for identity (`mod.Color.RED is mod.Color.RED` for an IntEnum)."""


def _text(value: object, default: str) -> str:
    return value[:200] if isinstance(value, str) and value else default


def _getattr(self: object, name: str) -> Any:
    remote = self.__dict__.get("_pse_remote") if name != "_pse_remote" else None
    if remote is None:
        raise AttributeError(name)
    return getattr(remote, name)


def _exception_str(self: BaseException) -> str:
    return str(self.__dict__.get("_pse_text", BaseException.__str__(self)))


def _value_repr(self: object) -> str:
    try:
        return repr(self.__dict__["_pse_remote"])
    except BaseException:  # the product could not be asked: the plain value's own form
        base: Any = type(self).__mro__[1]
        return str(base.__repr__(self))


class StandIns:
    """The stand-in classes made so far (by the product's handle of each class), and kept values."""

    def __init__(self, remote: Callable[[int], Remote]) -> None:
        self._remote = remote
        self._classes: dict[int, type] = {}
        self._values: dict[int, object] = {}

    def exception_class(self, info: object) -> type[BaseException]:
        """The stand-in of a product exception class, made once, on the stand-ins of its bases."""
        if (
            not isinstance(info, dict)
            or type(info.get("hid")) is not int
            or type(info.get("bases")) is not list
        ):
            raise ValueError("a malformed exception class")
        hid: int = info["hid"]
        known = self._classes.get(hid)
        if known is not None and issubclass(known, BaseException):
            return known
        bases = tuple(self._exception_base(b) for b in info["bases"][:8]) or (Exception,)
        qualname = _text(info.get("name"), "ProductException")
        namespace = {
            "__module__": _text(info.get("module"), "product"),
            "__qualname__": qualname,
            "__getattr__": _getattr,
            "__str__": _exception_str,
            "_pse_class": self._remote(hid),
        }
        name = qualname.rpartition(".")[2] or "ProductException"
        try:
            made = type(name, bases, namespace)
        except TypeError:  # bases whose layouts cannot be combined: the first alone
            made = type(name, bases[:1], namespace)
        self._classes[hid] = made
        return made

    def _exception_base(self, node: object) -> type[BaseException]:
        if isinstance(node, list) and len(node) == 2 and node[0] == "builtin":
            kind = getattr(builtins, str(node[1]), None)
            return kind if isinstance(kind, type) and issubclass(kind, BaseException) else Exception
        return self.exception_class(node)

    def exception(
        self, kind: type[BaseException], args: tuple[Any, ...], hid: object, text: object
    ) -> BaseException:
        """An exception of `kind` (a built-in or a stand-in) as the product raised it."""
        try:
            made = kind(*args)
        except Exception:  # a base's __init__ that refuses the product's arguments
            made = kind.__new__(kind)
            made.args = args
        if kind.__module__ != "builtins" and type(hid) is int:
            made.__dict__.update(_pse_remote=self._remote(hid), _pse_text=str(text))
        return made

    def value(self, plain: object, hid: int, info: object) -> object:
        """The stand-in of the product's instance `hid` of a subclass of `type(plain)` (a built-in)."""
        base = type(plain)
        if base not in BASES or not isinstance(info, dict) or type(info.get("hid")) is not int:
            raise ValueError("a malformed subclass value")
        known = self._values.get(hid)
        if known is not None and type(known).__mro__[1] is base:
            return known
        kind = self._classes.get(info["hid"])
        if kind is None or kind.__mro__[1] is not base:
            qualname = _text(info.get("name"), "value")
            namespace = {
                "__module__": _text(info.get("module"), "product"),
                "__qualname__": qualname,
                "__getattr__": _getattr,
                "__repr__": _value_repr,
            }
            kind = type(qualname.rpartition(".")[2] or "value", (base,), namespace)
            self._classes[info["hid"]] = kind
        maker: Any = base
        made: Any = maker.__new__(kind, plain) if base in _IMMUTABLE else maker.__new__(kind)
        if base not in _IMMUTABLE:
            maker.__init__(made, plain)
        made.__dict__["_pse_remote"] = self._remote(hid)
        if len(self._values) < _KEPT:
            self._values[hid] = made
        return made
