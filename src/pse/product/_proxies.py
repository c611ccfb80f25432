"""The check's side of the channel: what a test holds of the product, and how it reaches it.

A value the product returns arrives as what it is when its type is a built-in one (exact types, rebuilt
here: no `__eq__` of the product's runs in this process), as a **stand-in** (`pse.product._stand_ins`)
when it is an instance of a subclass of a built-in or an exception, and as a **Remote** handle
(`pse.product._remote`) for anything else. Each product object has one Remote here at a time (a test's
`is` holds as in the product); when the test lets go of it, the product is told with the next request.

A test's value crosses by copy, its containers written back after the call (`pse.product._values`); a
test's callable becomes a callback the product can call while the test's call runs; a test's exception
crossing the product comes back as itself. Anything else of the test cannot cross, and the call fails
with `ProductError`, as it does when the channel broke (the product died, timed out or broke the
protocol): a BaseException, so that no `except Exception` and no `pytest.raises(ValueError)` of a test
takes it for the product's answer.
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
from pse.product._stand_ins import BASES, StandIns
from pse.product._values import Exchange, Node, Unsupported, base_copy, decode, encode

__all__ = ["Product", "ProductError"]
__tracebackhide__ = True  # pytest leaves out this module's frames: a test reads its own and the product's


class ProductError(BaseException):
    """The product could not be asked: the channel broke, or a value of the test cannot cross."""


class Product:
    """The channel to one product process, as the tests of one session use it."""

    def __init__(self, read_fd: int, write_fd: int, call_timeout_s: float) -> None:
        self.connection = Connection(read_fd, write_fd, self, self._serve)
        self.connection.on_answer = self._answered
        self.call_timeout_s = call_timeout_s
        self.counting = False
        """True while a test runs: calls are counted then, not at collection."""
        self.ran: dict[str, int] = {}
        """Calls the tests made into each workspace file (as the product says where the code lives)."""
        self.stand_ins = StandIns(self.remote)
        self._remotes: weakref.WeakValueDictionary[int, Remote] = weakref.WeakValueDictionary()
        self._released: list[int] = []
        self._callbacks: dict[int, Callable[..., object]] = {}
        self._callback_ids: dict[int, int] = {}
        self._raised: dict[int, BaseException] = {}
        """The test's exceptions crossing the product in the current call (by token), given back as they
        were if the product lets them out; forgotten when the test's call ends."""
        self._depth = 0

    def ask(self, op: str, *args: object) -> Any:
        """One request to the product; its answer, or the product's exception raised here."""
        released, self._released = self._released, []
        self._depth += 1
        try:
            return self.connection.request(
                op, list(args), time.monotonic() + self.call_timeout_s, release=released
            )
        except Raised as exc:
            raise exc.value from None  # type: ignore[misc]  # decoded as an exception (`decode_other`)
        except Broken as exc:
            raise ProductError(f"the product process cannot be asked any more: {exc}") from None
        except Unsupported as exc:
            raise ProductError(f"{exc} (the delivered code runs in a process of its own)") from None
        finally:
            self._depth -= 1
            if self._depth == 0:
                self._raised.clear()

    def remote(self, hid: int) -> Remote:
        """The one Remote of the product's object `hid`."""
        known = self._remotes.get(hid)
        if known is not None:
            return known
        if hid in self._released:  # let go of, then met again before the product was told
            self._released.remove(hid)
        made = Remote.__new__(Remote)
        object.__setattr__(made, "_pse_hid", hid)
        object.__setattr__(made, "_pse_product", self)
        self._remotes[hid] = made
        weakref.finalize(made, self._released.append, hid)
        return made

    def _answered(self, answer: dict[str, Any]) -> None:
        """What the product printed during the call goes where the test's output goes (capsys sees it)."""
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

    # ---- this side's values (`pse.product._values.Policy`) ---------------------------------------

    def encode_other(self, value: object, exchange: Exchange, depth: int) -> Node:
        remote = _remote_of(value)
        if remote is not None:
            return ["handle", object.__getattribute__(remote, "_pse_hid")]
        if isinstance(value, BaseException):
            self._raised[id(value)] = value
            base = next(k.__name__ for k in type(value).__mro__ if getattr(builtins, k.__name__, None) is k)
            return ["cexc", id(value), base, str(value)[:2000]]
        base_type = next((b for b in BASES if isinstance(value, b)), None)
        if base_type is not None:  # a subclass of a built-in the test made: its plain value
            return encode(base_copy(value, base_type), exchange, depth)
        name = _builtin_name(value)
        if name is not None:
            return ["builtin", name]
        if callable(value):
            cid = self._callback_ids.setdefault(id(value), len(self._callbacks) + 1)
            self._callbacks[cid] = value
            return ["callback", cid]
        kind = type(value)
        raise Unsupported(f"a {kind.__module__}.{kind.__qualname__} cannot be passed to the product")

    def decode_other(self, node: Node, exchange: Exchange, depth: int) -> object:
        tag, rest = node[0], node[1:]
        if tag == "handle" and len(rest) == 1 and type(rest[0]) is int:
            return self.remote(rest[0])
        if tag == "builtin" and len(rest) == 1:
            kind = getattr(builtins, str(rest[0]), None)
            if isinstance(kind, type) and issubclass(kind, BaseException):
                return kind
        elif tag == "class" and len(rest) == 1:
            return self.stand_ins.exception_class(rest[0])
        elif tag == "sub" and len(rest) == 3 and type(rest[1]) is int:
            return self.stand_ins.value(decode(rest[0], exchange, depth + 1), rest[1], rest[2])
        elif tag == "exc" and len(rest) == 5:
            return self._exception(rest, exchange, depth)
        elif tag == "callback" and len(rest) == 1 and rest[0] in self._callbacks:
            return self._callbacks[rest[0]]
        elif tag == "cexc" and len(rest) == 1 and rest[0] in self._raised:
            return self._raised[rest[0]]
        raise ValueError(f"a value tagged {str(tag)[:40]!r} the check does not take")

    def _exception(self, rest: list[Any], exchange: Exchange, depth: int) -> BaseException:
        kind_node, args, hid, text, shown = rest
        kind = decode(kind_node, exchange, depth + 1)
        if not (isinstance(kind, type) and issubclass(kind, BaseException)) or type(args) is not list:
            raise ValueError("a malformed exception")
        made = self.stand_ins.exception(kind, tuple(decode(a, exchange, depth + 1) for a in args), hid, text)
        if type(shown) is str and shown:
            made.add_note("in the product process:\n" + shown[-4000:].rstrip())
        return made


def _remote_of(value: object) -> Remote | None:
    """The Remote a value of the product holds: itself, or a stand-in's (its value's or its class's)."""
    if type(value) is Remote:
        return value
    held = getattr(value, "__dict__", None)
    if isinstance(held, dict) and type(held.get("_pse_remote")) is Remote:
        return held["_pse_remote"]  # type: ignore[no-any-return]
    if isinstance(value, type) and type(value.__dict__.get("_pse_class")) is Remote:
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
    builtin_owner = isinstance(owner, type) and getattr(builtins, owner.__name__, None) is owner
    if builtin_owner and getattr(owner, name, None) is value:
        return f"{owner.__name__}.{name}"  # type: ignore[union-attr]
    return None
