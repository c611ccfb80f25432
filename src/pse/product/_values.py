"""Values across the channel between a check and the product it measures: tagged JSON, both ways.

Every node is a JSON list whose first item is its tag:

    ["none"]  ["bool", b]  ["int", hex]  ["float", hex]  ["complex", hex, hex]  ["str", s]  ["bytes", hex]
    ["ellipsis"]  ["range", a, b, c]  ["tuple", [nodes]]  ["frozenset", [nodes]]
    ["list", rid, [nodes]]  ["dict", rid, [[key, value], ...]]  ["set", rid, [nodes]]  ["bytearray", rid, hex]
    ["ref", rid]          a mutable container met before in the same exchange (aliasing, cycles)
    ["std", name, ...]    a standard-library value type of a fixed table (Decimal, date, Path...:
                          `pse.product._stdlib_values`)

Any other tag is the side's own (`Policy`): the product sends handles to its objects, the check sends
handles back and its callables as callbacks. Only *exact* built-in types are encoded here; a subclass
goes to the policy, which knows whose it is.

An **exchange** is one request and its answer. Each mutable container the requester sends gets an id
(`rid`); the answer holds, beside its value, the final content of each of them (`write-back`), and the
requester puts that content into its own objects: a list the product sorted in place is sorted in the
test's process too, and a returned argument is the test's own object (`result is items`). Decoding is
strict: every payload's JSON type is checked, and nothing but the listed types (and what the policy
builds) comes out. Standard library only (the product process loads this module).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from pse.product._node_fields import as_int, as_list, exactly, hex_int, text
from pse.product._stdlib_values import std_fields, std_name, std_value

__all__ = [
    "MAX_DEPTH",
    "Exchange",
    "Policy",
    "Unsupported",
    "base_copy",
    "decode",
    "decode_write_back",
    "encode",
    "encode_write_back",
]

MAX_DEPTH = 200
"""Most nested levels of one value, both ways."""
Node = list[Any]
_MUTABLE = (list, dict, set, bytearray)
_EXACT_MUTABLE: dict[type, str] = {list: "list", dict: "dict", set: "set", bytearray: "bytearray"}


class Unsupported(TypeError):
    """A value cannot cross the channel (too deep, or a type neither side can send)."""


class Policy(Protocol):
    """What one side does with values the shared tags do not cover."""

    def encode_other(self, value: object, exchange: Exchange, depth: int) -> Node: ...

    def decode_other(self, node: Node, exchange: Exchange, depth: int) -> object: ...


class Exchange:
    """The mutable containers of one request and its answer, by id both ways."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.objects: dict[int, object] = {}
        self._rids: dict[int, int] = {}
        self.sent: frozenset[int] = frozenset()
        """The rids of the request's containers (the write-back's subjects), on both sides."""
        self._next = 1

    def seal_request(self) -> None:
        """The request is encoded (requester) or decoded (answerer): its containers are the write-back's."""
        self.sent = frozenset(self.objects)

    def register(self, value: object, rid: int | None = None) -> int:
        if rid is None:
            rid, self._next = self._next, self._next + 1
        else:
            self._next = max(self._next, rid + 1)
        self.objects[rid] = value
        self._rids[id(value)] = rid
        return rid

    def rid_of(self, value: object) -> int | None:
        return self._rids.get(id(value))


def base_copy(value: Any, base: type) -> Any:
    """An exact `base` copy of `value` (an instance of a subclass of `base`), read from the base type's
    own storage: an override of `__iter__`, `__int__` or `__str__` cannot change what it holds."""
    if base is int:
        return int.__int__(value)
    if base is float:
        return float.__float__(value)
    if base is complex:
        return complex(complex.real.__get__(value), complex.imag.__get__(value))
    if base is str:
        return str.__str__(value)
    if base in (bytes, bytearray):
        return base(memoryview(value))
    if base in (list, tuple):
        return base.__getitem__(value, slice(None))
    if base in (dict, set, frozenset):
        return base.copy(value)
    raise Unsupported(f"no base copy of {base.__name__}")


def encode(value: Any, exchange: Exchange, depth: int = 0) -> Node:
    """`value` as a node; mutable containers are registered in `exchange` (a second meeting is a ref)."""
    if depth > MAX_DEPTH:
        raise Unsupported(f"a value nested deeper than {MAX_DEPTH} levels")
    kind = type(value)
    if value is None:
        return ["none"]
    if kind is bool:
        return ["bool", value]
    if kind is int:
        return ["int", format(value, "x")]  # hex: no int-to-str digit limit
    if kind is float:
        return ["float", float.hex(value)]
    if kind is complex:
        return ["complex", value.real.hex(), value.imag.hex()]
    if kind is str:
        return ["str", value]
    if kind is bytes:
        return ["bytes", value.hex()]
    if value is Ellipsis:
        return ["ellipsis"]
    if kind is range:
        return ["range", *(encode(v, exchange, depth + 1) for v in (value.start, value.stop, value.step))]
    if kind in (tuple, frozenset):
        return [kind.__name__, [encode(item, exchange, depth + 1) for item in value]]
    if kind in _EXACT_MUTABLE:
        rid = exchange.rid_of(value)
        if rid is not None:
            return ["ref", rid]
        return [_EXACT_MUTABLE[kind], exchange.register(value), contents(value, exchange, depth)]
    named = std_name(value)
    if named is not None:
        return ["std", named, *std_fields(named, value, lambda plain: contents(plain, exchange, depth))]
    return exchange.policy.encode_other(value, exchange, depth)


def contents(value: Any, exchange: Exchange, depth: int) -> Any:
    """A mutable container's content node (what a write-back carries for it)."""
    if isinstance(value, bytearray):
        return bytes(value).hex()
    if isinstance(value, dict):
        return [[encode(k, exchange, depth + 1), encode(v, exchange, depth + 1)] for k, v in value.items()]
    return [encode(item, exchange, depth + 1) for item in value]


def decode(node: object, exchange: Exchange, depth: int = 0) -> object:
    """Rebuild one node as real instances of its types, or raise ValueError (a malformed node)."""
    if depth > MAX_DEPTH:
        raise ValueError(f"a value nested deeper than {MAX_DEPTH} levels")
    if type(node) is not list or not node or type(node[0]) is not str:
        raise ValueError("a value node is not a tagged list")
    tag, rest = node[0], node[1:]
    simple = _SIMPLE.get(tag)
    if simple is not None:
        return simple(rest)
    if tag == "range":
        a, b, c = (as_int(decode(v, exchange, depth + 1)) for v in exactly(rest, 3))
        return range(a, b, c)
    if tag in ("tuple", "frozenset"):
        (items,) = exactly(rest, 1)
        built = [decode(item, exchange, depth + 1) for item in as_list(items)]
        return tuple(built) if tag == "tuple" else frozenset(built)
    if tag == "ref":
        (rid,) = exactly(rest, 1)
        if type(rid) is not int or rid not in exchange.objects:
            raise ValueError("a ref to no container of this exchange")
        return exchange.objects[rid]
    if tag in ("list", "dict", "set", "bytearray"):
        rid, payload = exactly(rest, 2)
        if type(rid) is not int or rid < 1 or rid in exchange.objects:
            raise ValueError("a container with a bad or repeated id")
        container: Any = {"list": list, "dict": dict, "set": set, "bytearray": bytearray}[tag]()
        exchange.register(container, rid)
        fill(container, payload, exchange, depth)
        return container
    if tag == "std":
        return std_value(rest, lambda plain, payload: fill(plain, payload, exchange, depth))
    return exchange.policy.decode_other(node, exchange, depth)


def fill(container: Any, payload: object, exchange: Exchange, depth: int) -> None:
    """Put a content node into an (empty) container of the same kind."""
    if isinstance(container, bytearray):
        if type(payload) is not str:
            raise ValueError("a bytearray's content is not hex text")
        container.extend(bytes.fromhex(payload))
    elif isinstance(container, dict):
        for pair in as_list(payload):
            key, value = exactly(as_list(pair), 2)
            container[_hashable(decode(key, exchange, depth + 1))] = decode(value, exchange, depth + 1)
    elif isinstance(container, set):
        container.update(_hashable(decode(item, exchange, depth + 1)) for item in as_list(payload))
    else:
        container.extend(decode(item, exchange, depth + 1) for item in as_list(payload))


def encode_write_back(exchange: Exchange) -> list[list[Any]]:
    """The final content of each mutable container the other side sent (answerer's side)."""
    sent = [(rid, exchange.objects[rid]) for rid in sorted(exchange.sent)]
    return [[rid, contents(value, exchange, 0)] for rid, value in sent if isinstance(value, _MUTABLE)]


def decode_write_back(payload: object, exchange: Exchange) -> Callable[[], None]:
    """Decode a write-back into the requester's own containers; returns what applies it (all of it is
    decoded before any container changes)."""
    updates: list[tuple[Any, Any]] = []
    for entry in as_list(payload):
        rid, content = exactly(as_list(entry), 2)
        target = exchange.objects.get(rid) if type(rid) is int and rid in exchange.sent else None
        if not isinstance(target, _MUTABLE):
            raise ValueError("a write-back for no container of the request")
        fresh: Any = next(kind() for kind in _MUTABLE if isinstance(target, kind))
        fill(fresh, content, exchange, 0)
        updates.append((target, fresh))

    def apply() -> None:
        for target, fresh in updates:
            if isinstance(target, (list, bytearray)):
                target[:] = fresh
            else:
                target.clear()
                target.update(fresh)

    return apply


def _hashable(value: object) -> object:
    try:
        hash(value)
    except TypeError:
        raise ValueError("an unhashable key or set item") from None
    return value


def _bool(rest: list[Any]) -> bool:
    (value,) = exactly(rest, 1)
    if type(value) is not bool:
        raise ValueError("a bool that is not true or false")
    return value


def _constant(value: object) -> Callable[[list[Any]], object]:
    def build(rest: list[Any]) -> object:
        exactly(rest, 0)
        return value

    return build


_SIMPLE: dict[str, Callable[[list[Any]], object]] = {
    "none": _constant(None),
    "ellipsis": _constant(Ellipsis),
    "bool": _bool,
    "int": hex_int,
    "float": lambda rest: float.fromhex(text(rest)),
    "complex": lambda rest: complex(float.fromhex(text(rest[:1])), float.fromhex(text(rest[1:]))),
    "str": text,
    "bytes": lambda rest: bytes.fromhex(text(rest)),
}
