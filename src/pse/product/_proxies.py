"""The check's side of the channel: what a test holds of the product, and how it reaches it.

A value the product returns arrives as what it is when its type is a built-in one (exact types, rebuilt
here: no `__eq__` of the product's runs in this process), as a **stand-in** when it is an instance of a
subclass of a built-in (a class made here on that built-in, holding the plain value: its comparisons
are the built-in's; its other attributes are asked of the product) or an exception (a stand-in class per
product exception class, on the built-in exception bases, so `pytest.raises(mod.MyError)` works), and
as a **Remote** handle for anything else: attribute access, calls, iteration, `len`, indexing,
operators and `with` are asked of the product, and what comes back is decoded the same way.

A Remote compares equal only to a Remote (the product then decides); compared with a value of the
test it is never equal, and never ordered: the product never decides whether its result equals what a
test expects. A test's callable passed to the product becomes a callback the product can call (only
while the test's call runs); any other object of the test cannot cross, and the test fails with
`ProductError` saying so.
"""

from __future__ import annotations

import builtins
import sys
import time
import weakref
from collections.abc import Callable
from typing import Any

from pse.product._channel import Broken, Connection, Raised
from pse.product._remote import Remote
from pse.product._values import Exchange, Node, Unsupported, base_copy, decode, encode

__all__ = ["Product", "ProductError", "Remote"]

_BASES = (int, float, complex, str, bytes, bytearray, list, tuple, dict, set, frozenset)
_STAND_INS = 10_000
"""Most stand-in values kept for identity (`mod.Color.RED is mod.Color.RED` for an IntEnum)."""


class ProductError(BaseException):
    """The product could not be asked: the channel broke (it died, timed out or broke the protocol) or a
    value of the test cannot cross. A BaseException, so that no `except Exception` or
    `pytest.raises(ValueError)` of a test takes it for the product's own answer."""


class Product:
    """The channel to one product process, as the tests of one session use it."""

    def __init__(self, read_fd: int, write_fd: int, call_timeout_s: float) -> None:
        self.connection = Connection(read_fd, write_fd, self, self._serve)
        self.connection.on_answer = self._printed
        self.call_timeout_s = call_timeout_s
        self.counting = False
        """True while a test runs: calls are counted for the evidence then, not at collection."""
        self.ran: dict[str, int] = {}
        """Calls the tests made into each workspace file (as the product reports where the code lives)."""
        self._remotes: weakref.WeakValueDictionary[int, Remote] = weakref.WeakValueDictionary()
        self._stand_ins: dict[int, object] = {}
        self._classes: dict[int, type] = {}
        self._released: list[int] = []
        self._callbacks: dict[int, Callable[..., object]] = {}
        self._callback_ids: dict[int, int] = {}
        self._raised: dict[int, BaseException] = {}
        """The test's exceptions crossing the product in the current call (by token), given back as they
        were if the product lets them out; forgotten when the test's call ends."""
        self._depth = 0

    # ---- asking the product -----------------------------------------------------------------------

    def ask(self, op: str, *args: object) -> object:
        """One request to the product; its answer, or the product's exception raised here."""
        released, self._released = self._released, []
        deadline = time.monotonic() + self.call_timeout_s
        self._depth += 1
        try:
            return self.connection.request(op, list(args), deadline, release=released)
        except Raised as exc:
            raise exc.value from None  # type: ignore[misc]
        except Broken as exc:
            raise ProductError(f"the product process cannot be asked any more: {exc}") from None
        except Unsupported as exc:
            raise ProductError(f"{exc} (the delivered code runs in a process of its own)") from None
        finally:
            self._depth -= 1
            if self._depth == 0:
                self._raised.clear()

    def _printed(self, answer: dict[str, Any]) -> None:
        for name, stream in (("out", sys.stdout), ("err", sys.stderr)):
            text = answer.get(name)
            if type(text) is str and text:
                stream.write(text)
        ran = answer.get("ran")
        if self.counting and type(ran) is str and ran:
            self.ran[ran[:500]] = self.ran.get(ran[:500], 0) + 1

    def _serve(self, op: str, args: list[Any], request: dict[str, Any]) -> object:
        """The product's requests: only calls of the callables a test passed it."""
        cid = request.get("cid")
        if op != "callback" or type(cid) is not int or cid not in self._callbacks or len(args) != 2:
            raise ProductError("the product asked for something other than a test's callback")
        positional, named = args
        if type(positional) is not tuple or type(named) is not dict:
            raise ProductError("a callback request without its arguments")
        return self._callbacks[cid](*positional, **named)

    # ---- the policy: this side's values ---------------------------------------------------------

    def encode_other(self, value: object, exchange: Exchange, depth: int) -> Node:
        remote = _remote_of(value)
        if remote is not None:
            return ["handle", object.__getattribute__(remote, "_pse_hid")]
        if isinstance(value, BaseException):
            token = id(value)
            self._raised[token] = value
            base = next(k.__name__ for k in type(value).__mro__ if k.__module__ == "builtins")
            return ["cexc", token, base, str(value)[:2000]]
        base = next((b for b in _BASES if isinstance(value, b)), None)
        if base is not None:  # a subclass of a built-in the test made: its plain value
            return encode(base_copy(value, base), exchange, depth)
        name = _builtin_name(value)
        if name is not None:
            return ["builtin", name]
        if callable(value):
            cid = self._callback_ids.setdefault(id(value), len(self._callbacks) + 1)
            self._callbacks[cid] = value
            return ["callback", cid]
        raise Unsupported(
            f"a {type(value).__module__}.{type(value).__qualname__} cannot be passed to the product"
        )

    def decode_other(self, node: Node, exchange: Exchange, depth: int) -> object:
        tag, rest = node[0], node[1:]
        if tag == "handle" and len(rest) == 1 and type(rest[0]) is int:
            return self.remote(rest[0])
        if tag == "builtin" and len(rest) == 1 and type(rest[0]) is str:
            kind = getattr(builtins, rest[0], None)
            if isinstance(kind, type) and issubclass(kind, BaseException):
                return kind
        elif tag == "class" and len(rest) == 1:
            return self.exception_class(rest[0])
        elif tag == "sub" and len(rest) == 3:
            return self._sub(rest, exchange, depth)
        elif tag == "exc" and len(rest) == 5:
            return self._exception(rest, exchange, depth)
        elif tag == "callback" and len(rest) == 1 and rest[0] in self._callbacks:
            return self._callbacks[rest[0]]
        elif tag == "cexc" and len(rest) == 1 and rest[0] in self._raised:
            return self._raised[rest[0]]
        raise ValueError(f"a value tagged {str(tag)[:40]!r} the check does not take")

    def remote(self, hid: int) -> Remote:
        """The one Remote of the product's object `hid` (a test's `is` holds as in the product)."""
        known = self._remotes.get(hid)
        if known is not None:
            return known
        if hid in self._released:
            self._released.remove(hid)
        made = Remote.__new__(Remote)
        object.__setattr__(made, "_pse_hid", hid)
        object.__setattr__(made, "_pse_product", self)
        self._remotes[hid] = made
        weakref.finalize(made, self._released.append, hid)
        return made

    def exception_class(self, info: object) -> type:
        """The stand-in class of a product exception class (made once, on built-in exception bases)."""
        if type(info) is not dict or type(info.get("hid")) is not int or type(info.get("bases")) is not list:
            raise ValueError("a malformed exception class")
        hid = info["hid"]
        if hid in self._classes:
            return self._classes[hid]
        bases = tuple(self._exception_base(b) for b in info["bases"][:8]) or (Exception,)
        namespace = {
            "__module__": str(info.get("module", ""))[:200],
            "__qualname__": str(info.get("name", "ProductError"))[:200],
            "__getattr__": _stand_in_getattr,
            "__str__": _stand_in_str,
            "_pse_class": self.remote(hid),
        }
        name = namespace["__qualname__"].rpartition(".")[2] or "ProductException"
        try:
            made = type(name, bases, namespace)
        except TypeError:  # bases whose layouts cannot be combined: the first one alone
            made = type(name, bases[:1], namespace)
        self._classes[hid] = made
        return made

    def _exception_base(self, node: object) -> type:
        if type(node) is list and node[:1] == ["builtin"] and len(node) == 2:
            kind = getattr(builtins, str(node[1]), None)
            return kind if isinstance(kind, type) and issubclass(kind, BaseException) else Exception
        if type(node) is list and node[:1] == ["class"] and len(node) == 2:
            return self.exception_class(node[1])
        return self.exception_class(node)

    def _exception(self, rest: list[Any], exchange: Exchange, depth: int) -> BaseException:
        kind_node, args, hid, text, shown = rest
        kind = decode(kind_node, exchange, depth + 1)
        if not (isinstance(kind, type) and issubclass(kind, BaseException)) or type(args) is not list:
            raise ValueError("a malformed exception")
        values = tuple(decode(a, exchange, depth + 1) for a in args)
        try:
            made = kind(*values)
        except Exception:  # a stand-in's base __init__ refused the product's args
            made = kind.__new__(kind)
            made.args = values
        if kind.__module__ != "builtins":
            made.__dict__.update(_pse_remote=self.remote(_int(hid)), _pse_text=str(text))
        if type(shown) is str and shown:
            made.add_note("in the product process:\n" + shown[-4000:].rstrip())
        return made

    def _sub(self, rest: list[Any], exchange: Exchange, depth: int) -> object:
        plain_node, hid, info = rest
        plain = decode(plain_node, exchange, depth + 1)
        base = type(plain)
        if base not in _BASES or type(info) is not dict or type(info.get("hid")) is not int:
            raise ValueError("a malformed subclass value")
        hid = _int(hid)
        if hid in self._stand_ins and type(self._stand_ins[hid]).__mro__[1] is base:
            return self._stand_ins[hid]
        kind = self._classes.get(info["hid"])
        if kind is None or kind.__mro__[1] is not base:
            namespace = {
                "__module__": str(info.get("module", ""))[:200],
                "__qualname__": str(info.get("name", "value"))[:200],
                "__getattr__": _stand_in_getattr,
                "__repr__": _stand_in_repr,
            }
            kind = type(namespace["__qualname__"].rpartition(".")[2] or "value", (base,), namespace)
            self._classes[info["hid"]] = kind
        made: Any = (
            base.__new__(kind, plain)
            if base in (int, float, complex, str, bytes, tuple, frozenset)
            else base.__new__(kind)
        )
        if base in (list, dict, set, bytearray):
            base.__init__(made, plain)
        made.__dict__["_pse_remote"] = self.remote(hid)
        if len(self._stand_ins) < _STAND_INS:
            self._stand_ins[hid] = made
        return made


def _int(value: object) -> int:
    if type(value) is not int:
        raise ValueError("a handle that is not an int")
    return value


def _remote_of(value: object) -> Remote | None:
    if type(value) is Remote:
        return value
    held = getattr(value, "__dict__", None)
    if isinstance(held, dict) and type(held.get("_pse_remote")) is Remote:  # a stand-in value
        return held["_pse_remote"]  # type: ignore[no-any-return]
    if isinstance(value, type) and type(value.__dict__.get("_pse_class")) is Remote:  # a stand-in class
        return value.__dict__["_pse_class"]  # type: ignore[no-any-return]
    return None


def _builtin_name(value: object) -> str | None:
    """`len`, `str`, `str.lower`: a built-in the product has too (it gets its own, not a callback)."""
    name = getattr(value, "__name__", None)
    if not isinstance(name, str):
        return None
    if getattr(builtins, name, None) is value:
        return name
    owner = getattr(value, "__objclass__", None)
    if (
        isinstance(owner, type)
        and getattr(builtins, owner.__name__, None) is owner
        and getattr(owner, name, None) is value
    ):
        return f"{owner.__name__}.{name}"
    return None


def _stand_in_getattr(self: object, name: str) -> object:
    remote = self.__dict__.get("_pse_remote") if name != "_pse_remote" else None
    if remote is None:
        raise AttributeError(name)
    return getattr(remote, name)


def _stand_in_str(self: BaseException) -> str:
    return str(self.__dict__.get("_pse_text", BaseException.__str__(self)))


def _stand_in_repr(self: object) -> str:
    remote = self.__dict__.get("_pse_remote")
    try:
        return repr(remote) if remote is not None else object.__repr__(self)
    except BaseException:
        return type(self).__mro__[1].__repr__(self)  # type: ignore[no-any-return]
