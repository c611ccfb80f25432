"""The product process: the delivered code, imported and called on behalf of a check that never imports it.

PSE starts it in the sandbox beside the check, as a plain `python -c` in the workspace would run:
its current folder is the workspace (a sealed snapshot of it), `''` first on `sys.path`, the command
environment, no test framework loaded. Its stdin and stdout are the channel to the check; the server
moves them aside at once (fd 0 reads /dev/null, fd 1 writes where fd 2 does), so what the product
prints never reaches the channel: what it prints through `sys.stdout`/`sys.stderr` while a call runs
goes back with the answer (the check prints it, so `capsys` sees it), the rest goes to the process's
stderr file.

The server answers the check's requests (`pse.product._channel`): import a module, get or set an
attribute, call, apply an operator. Whatever a call returns goes back as plain values where the type is
a built-in one (`pse.product._values`), else as a handle to the object, which stays here: the check
only ever holds the handle. Nothing here is trusted by the check: the product may replace all of it.
Standard library only.
"""

from __future__ import annotations

import builtins
import importlib
import io
import operator
import os
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any

from pse.product._channel import Connection
from pse.product._values import Exchange, Node, Unsupported, base_copy, encode

__all__ = ["serve"]

MAX_PRINTED_CHARS = 1 << 20
"""What one answer carries of the product's output, per stream."""
_BUILTIN_BASES = (bool, int, float, complex, str, bytes, bytearray, list, tuple, dict, set, frozenset)
_OPERATORS = (
    "add",
    "sub",
    "mul",
    "truediv",
    "floordiv",
    "mod",
    "pow",
    "matmul",
    "lshift",
    "rshift",
    "and_",
    "or_",
    "xor",
    "neg",
    "pos",
    "abs",
    "invert",
    "index",
    "iadd",
    "isub",
    "imul",
    "itruediv",
    "ifloordiv",
    "imod",
    "ipow",
    "imatmul",
    "ilshift",
    "irshift",
    "iand",
    "ior",
    "ixor",
    "lt",
    "le",
    "eq",
    "ne",
    "gt",
    "ge",
    "contains",
    "getitem",
    "setitem",
    "delitem",
)
_OPS: dict[str, Callable[..., object]] = {name: getattr(operator, name) for name in _OPERATORS}
_OPS.update(
    getattr=getattr, setattr=setattr, delattr=delattr, len=len, iter=iter, next=next, bool=bool, str=str,
    repr=repr, hash=hash, int=int, float=float, complex=complex, reversed=reversed, format=format,
    round=round, dir=dir, divmod=divmod, isinstance=isinstance, issubclass=issubclass,
    call=lambda f, args, kwargs: f(*args, **kwargs),
    enter=lambda obj: obj.__enter__(),
    exit=lambda obj, value: obj.__exit__(None if value is None else type(value), value, None),
)  # fmt: skip


class Handles:
    """The product's objects the check holds, by handle id (kept alive until the check lets go)."""

    def __init__(self) -> None:
        self.objects: dict[int, object] = {}
        self._ids: dict[int, int] = {}
        self._next = 1

    def hid(self, value: object) -> int:
        known = self._ids.get(id(value))
        if known is not None:
            return known
        hid, self._next = self._next, self._next + 1
        self.objects[hid], self._ids[id(value)] = value, hid
        return hid

    def get(self, hid: object) -> object:
        if type(hid) is not int or hid not in self.objects:
            raise ValueError("a handle the product never gave")
        return self.objects[hid]

    def release(self, hids: object) -> None:
        for hid in hids if type(hids) is list else []:
            value = self.objects.pop(hid, None) if type(hid) is int else None
            if value is not None:
                self._ids.pop(id(value), None)


class CheckerRaised(Exception):
    """Stands for an exception of the check (a test's callback raised it) while it crosses the product;
    if it leaves the product's call, the check gets its own exception object back."""


class Callback:
    """A test's callable, as the product holds it: calling it asks the check to call it."""

    def __init__(self, server: ProductPolicy, cid: int) -> None:
        self._server, self._cid = server, cid

    def __call__(self, *args: Any, **kwargs: Any) -> object:
        return self._server.call_back(self._cid, args, kwargs)

    def __repr__(self) -> str:
        return f"<the test's callable #{self._cid}>"


class ProductPolicy:
    """The product's side: what it sends as handles, and what it makes of the check's values."""

    def __init__(self) -> None:
        self.handles = Handles()
        self.connection: Connection | None = None
        self.depth = 0
        """Requests being served now (a callback may be called only from inside one)."""
        self._thread = threading.get_ident()
        self._callbacks: dict[int, Callback] = {}

    def class_info(self, kind: type) -> dict[str, Any]:
        bases = [["builtin", b.__name__] if _is_builtin(b) else self.class_info(b) for b in kind.__bases__]
        return {
            "hid": self.handles.hid(kind),
            "name": str(getattr(kind, "__qualname__", kind.__name__))[:200],
            "module": str(getattr(kind, "__module__", ""))[:200],
            "bases": bases,
        }

    def encode_other(self, value: object, exchange: Exchange, depth: int) -> Node:
        if isinstance(value, Callback):
            return ["callback", value._cid]
        if isinstance(value, CheckerRaised) and hasattr(value, "token"):
            return ["cexc", value.token]
        if isinstance(value, BaseException):
            args = [encode(a, exchange, depth + 1) for a in _safe(lambda: tuple(value.args), ())]
            text = _safe(lambda: str(value), "<unprintable>")[:4000]
            shown = _safe(lambda: _in_workspace(_products_traceback(value)), "")[-8000:]
            return ["exc", self._class_node(type(value)), args, self.handles.hid(value), text, shown]
        if isinstance(value, type) and issubclass(value, BaseException):
            return self._class_node(value)
        base = next((b for b in _BUILTIN_BASES if isinstance(value, b)), None)
        if base is not None:  # a subclass of a built-in: its plain value, and a handle for the rest
            info = {"hid": self.handles.hid(type(value)), "name": type(value).__qualname__[:200],
                    "module": str(type(value).__module__)[:200]}  # fmt: skip
            plain = encode(base_copy(value, base), exchange, depth + 1)
            return ["sub", plain, self.handles.hid(value), info]
        return ["handle", self.handles.hid(value)]

    def _class_node(self, kind: type) -> Node:
        if _is_builtin(kind):
            return ["builtin", kind.__name__]
        return ["class", self.class_info(kind)]

    def decode_other(self, node: Node, exchange: Exchange, depth: int) -> object:
        tag, rest = node[0], node[1:]
        if tag == "handle" and len(rest) == 1:
            return self.handles.get(rest[0])
        if tag == "callback" and len(rest) == 1 and type(rest[0]) is int:
            return self._callbacks.setdefault(rest[0], Callback(self, rest[0]))
        if tag == "builtin" and len(rest) == 1 and type(rest[0]) is str:
            return _builtin(rest[0])
        if tag == "cexc" and len(rest) == 3:
            token, base, text = rest
            raised: Any = _checker_raised(base)(str(text))
            raised.token = token
            return raised
        raise ValueError(f"a value tagged {str(tag)[:40]!r} the product does not take")

    def call_back(self, cid: int, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
        """Ask the check to call its callable `cid` (only while a request of the check is being served)."""
        if self.connection is None or self.depth == 0 or threading.get_ident() != self._thread:
            raise RuntimeError(
                "a test's callable can be called only while the test is calling the product, from the "
                "thread serving that call (PSE runs the tests in a process of their own)"
            )
        from pse.product._channel import Raised

        try:
            return self.connection.request("callback", [args, kwargs], cid=cid)
        except Raised as exc:
            raise exc.value from None  # type: ignore[misc]


def _is_builtin(kind: type) -> bool:
    """One of Python's own built-in classes (by identity: pytest's Skipped says `__module__ = "builtins"`)."""
    return getattr(builtins, kind.__name__, None) is kind


def _checker_raised(base: object) -> type[CheckerRaised]:
    """`CheckerRaised` that is also the built-in exception `base` (so `except ValueError` still catches a
    test's ValueError crossing the product)."""
    kind = _builtin(base) if type(base) is str else Exception
    if not isinstance(kind, type) or not issubclass(kind, BaseException) or kind is Exception:
        return CheckerRaised
    try:
        return type("CheckerRaised", (CheckerRaised, kind), {})
    except TypeError:  # a base whose layout cannot be combined
        return CheckerRaised


def _builtin(name: str) -> object:
    """A built-in by name (`len`, `str`, `str.lower`), as the check named one it passed."""
    first, _, method = name.partition(".")
    value = getattr(builtins, first, None)
    if value is None or (method and not isinstance(value, type)):
        raise ValueError(f"no built-in {name[:80]!r}")
    return getattr(value, method) if method else value


_OWN = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
"""PSE's own package folder: its frames (this server, the channel) are no part of the product's failure."""


def _products_traceback(value: BaseException) -> str:
    """`value`'s traceback, each exception of its chain with the product's frames only: what failed, and
    where in the delivered code, without PSE's serving frames (nothing a reader of the check can act on;
    and a path of this machine in them would make the same run read differently on another)."""
    shown = traceback.TracebackException.from_exception(value)
    seen, todo = set(), [shown]
    while todo:
        each = todo.pop()
        if id(each) in seen:
            continue
        seen.add(id(each))
        kept = [frame for frame in each.stack if not frame.filename.startswith(_OWN)]
        each.stack = traceback.StackSummary.from_list(kept)
        todo += [e for e in (each.__cause__, each.__context__, *(each.exceptions or ())) if e is not None]
    return "".join(shown.format())


def _in_workspace(text: str) -> str:
    """A traceback with each frame in a workspace file named inside the workspace (`File "pkg/a.py"`):
    the same on every run, whatever folder the snapshot is in, and what the check reads a failure's line
    from (`_checker.Recorder.where`)."""
    for root in dict.fromkeys((os.getcwd(), os.path.realpath(os.getcwd()))):
        text = text.replace(f'File "{root}{os.sep}', 'File "')
    return text


def _safe(read: Callable[[], Any], default: Any) -> Any:
    try:
        return read()
    except BaseException:  # a product's __str__ or args may raise anything
        return default


class _Printed(io.TextIOBase):
    """`sys.stdout` / `sys.stderr` of the product: text goes to the call being served, or to fd 2."""

    def __init__(self, stack: list[dict[str, Any]], name: str) -> None:
        self._stack, self._name = stack, name
        self.buffer = _PrintedBytes(self)

    encoding = "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        if self._stack:
            self._stack[-1][self._name].write(text)
        else:
            os.write(2, text.encode("utf-8", "replace"))
        return len(text)


class _PrintedBytes:
    def __init__(self, text: _Printed) -> None:
        self._text = text

    def write(self, data: bytes) -> int:
        return self._text.write(bytes(data).decode("utf-8", "replace"))

    def flush(self) -> None:
        return None


def serve() -> None:
    """The product process's life: take the channel off fds 0 and 1, then answer until the check leaves."""
    channel_in, channel_out = os.dup(0), os.dup(1)  # non-inheritable: the product's children never get them
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    stack: list[dict[str, Any]] = []
    sys.stdout, sys.stderr = _Printed(stack, "out"), _Printed(stack, "err")
    policy = ProductPolicy()

    def wrap(serve_one: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        stack.append({"out": io.StringIO(), "err": io.StringIO(), "ran": None})
        policy.depth += 1
        try:
            serve_one()
        finally:
            policy.depth -= 1
            done = stack.pop()
        answer = {name: done[name].getvalue()[:MAX_PRINTED_CHARS] for name in ("out", "err")}
        return {**answer, "ran": done["ran"]} if done["ran"] is not None else answer

    def handle(op: str, args: list[Any], request: dict[str, Any]) -> object:
        policy.handles.release(request.get("release"))
        if op == "import":
            return _import(str(args[0]), str(args[1]) if len(args) > 1 else ".")
        if op == "call" and args:  # which workspace file the called code lives in: the check counts it
            stack[-1]["ran"] = _code_file(args[0])
        function = _OPS.get(op)
        if function is None:
            raise Unsupported(f"the product does not serve {op[:40]!r}")
        return function(*args)

    policy.connection = Connection(channel_in, channel_out, policy, handle, wrap)
    policy.connection.hello()  # before any product code: a check that never gets it could not start
    policy.connection.serve_forever()


def _import(name: str, entry: str) -> tuple[object, str | None, bool, list[str]]:
    """Import `name` as a plain run would, with the workspace's folder `entry` on the path as the tests'
    configuration has it: (the module, its file relative to the workspace, whether it is a package, the
    names `import *` takes)."""
    folder = os.path.normpath(os.path.join(os.getcwd(), entry))
    inside = folder == os.getcwd() or folder.startswith(os.getcwd() + os.sep)
    if entry not in (".", "") and inside and folder not in sys.path:
        sys.path.insert(1, folder)  # after '' (the workspace), as PYTHONPATH=src would put it
    module = importlib.import_module(name)
    file = getattr(module, "__file__", None)
    relative = None
    if isinstance(file, str):
        real, root = os.path.realpath(file), os.path.realpath(os.getcwd())
        relative = os.path.relpath(real, root) if real.startswith(root + os.sep) else None
    exported = getattr(module, "__all__", None)
    names = [
        n for n in (exported if isinstance(exported, list | tuple) else dir(module)) if isinstance(n, str)
    ]
    if exported is None:
        names = [n for n in names if not n.startswith("_")]
    return module, relative, hasattr(module, "__path__"), names[:10_000]


def _code_file(value: object) -> str | None:
    """The workspace file the code of `value` (a function, method or class) was compiled from."""
    target = getattr(value, "__func__", value)
    code = getattr(target, "__code__", None)
    file = getattr(code, "co_filename", None)
    if file is None and isinstance(target, type):
        file = getattr(sys.modules.get(target.__module__), "__file__", None)
    if not isinstance(file, str):
        return None
    real, root = os.path.realpath(file), os.path.realpath(os.getcwd())
    return os.path.relpath(real, root) if real.startswith(root + os.sep) else None
