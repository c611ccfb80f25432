"""`Remote`: what a test holds of a product object that is no plain value. Every use is asked of the product.

Attribute access, calls, iteration, `len`, indexing, `in`, truth, `str`/`repr`, hashing, arithmetic,
`with`, `isinstance(x, remote_class)`: each is one request to the product process (`Product.ask`), and
its answer comes back decoded (plain values, stand-ins, Remotes). Two things are never asked:

* whether a Remote equals, or orders against, a value of the test: it does not (identity); only a
  comparison with another object of the product is the product's to answer;
* whether the product's context manager swallows a test's failed assertion: it cannot (a product that
  suppresses an exception in `__exit__` suppresses its own kind of failure, never an AssertionError).
"""

from __future__ import annotations

from typing import Any

__all__ = ["Remote"]
__tracebackhide__ = True  # pytest leaves out this module's frames: a test reads its own and the product's


def _ask(remote: Remote, op: str, *args: object) -> Any:
    return object.__getattribute__(remote, "_pse_product").ask(op, *args)


def _products(value: object) -> bool:
    """`value` is the product's (a Remote, or a stand-in holding one): a comparison is the product's."""
    if type(value) is Remote:
        return True
    held = getattr(value, "__dict__", None)
    return isinstance(held, dict) and type(held.get("_pse_remote")) is Remote


def _binary(name: str, reflected: bool = False) -> Any:
    def method(self: Remote, other: object) -> Any:
        return _ask(self, name, other, self) if reflected else _ask(self, name, self, other)

    return method


def _compare(name: str) -> Any:
    def method(self: Remote, other: object) -> Any:
        return _ask(self, name, self, other) if _products(other) else NotImplemented

    return method


def _unary(name: str) -> Any:
    return lambda self: _ask(self, name, self)


class Remote:
    __slots__ = ("__weakref__", "_pse_hid", "_pse_product")

    def __getattr__(self, name: str) -> Any:
        return _ask(self, "getattr", self, name)

    def __setattr__(self, name: str, value: object) -> None:
        _ask(self, "setattr", self, name, value)

    def __delattr__(self, name: str) -> None:
        _ask(self, "delattr", self, name)

    def __call__(self, *args: object, **kwargs: object) -> Any:
        return _ask(self, "call", self, args, kwargs)

    def __getitem__(self, key: object) -> Any:
        return _ask(self, "getitem", self, key)

    def __setitem__(self, key: object, value: object) -> None:
        _ask(self, "setitem", self, key, value)

    def __delitem__(self, key: object) -> None:
        _ask(self, "delitem", self, key)

    def __contains__(self, item: object) -> bool:
        return bool(_ask(self, "contains", self, item))

    def __iter__(self) -> Any:
        return _ask(self, "iter", self)

    def __next__(self) -> Any:
        return _ask(self, "next", self)

    def __format__(self, spec: str) -> str:
        return str(_ask(self, "format", self, spec))

    def __round__(self, digits: int | None = None) -> Any:
        return _ask(self, "round", self, digits)

    def __enter__(self) -> Any:
        return _ask(self, "enter", self)

    def __exit__(self, kind: object, value: BaseException | None, traceback: object) -> bool:
        suppress = bool(_ask(self, "exit", self, value))
        return suppress and isinstance(value, Exception) and not isinstance(value, AssertionError)

    def __instancecheck__(self, instance: object) -> bool:
        return bool(_ask(self, "isinstance", instance, self))

    def __subclasscheck__(self, subclass: object) -> bool:
        return bool(_ask(self, "issubclass", subclass, self))

    def __copy__(self) -> Remote:
        raise TypeError("a product object cannot be copied in the check's process")

    def __deepcopy__(self, memo: object) -> Remote:
        raise TypeError("a product object cannot be copied in the check's process")

    def __reduce_ex__(self, protocol: object) -> Any:
        raise TypeError("a product object cannot be pickled in the check's process")

    __len__ = _unary("len")
    __bool__ = _unary("bool")
    __str__ = _unary("str")
    __repr__ = _unary("repr")
    __hash__ = _unary("hash")
    __int__ = _unary("int")
    __float__ = _unary("float")
    __complex__ = _unary("complex")
    __index__ = _unary("index")
    __reversed__ = _unary("reversed")
    __dir__ = _unary("dir")
    __neg__, __pos__, __abs__, __invert__ = (_unary(n) for n in ("neg", "pos", "abs", "invert"))
    __eq__, __ne__, __lt__, __le__, __gt__, __ge__ = (
        _compare(n) for n in ("eq", "ne", "lt", "le", "gt", "ge")
    )
    __divmod__, __rdivmod__ = _binary("divmod"), _binary("divmod", reflected=True)


_ARITHMETIC = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "lshift", "rshift")
for _name in (*_ARITHMETIC, "and", "or", "xor"):
    _op = _name + "_" if _name in ("and", "or") else _name
    setattr(Remote, f"__{_name}__", _binary(_op))
    setattr(Remote, f"__r{_name}__", _binary(_op, reflected=True))
    setattr(Remote, f"__i{_name}__", _binary("i" + _op.rstrip("_")))


def _product_attribute(name: str) -> property:
    return property(lambda self: _ask(self, "getattr", self, name))


for _name in ("__doc__", "__module__"):  # the product's, not this class's
    setattr(Remote, _name, _product_attribute(_name))
