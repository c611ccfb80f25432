"""Strict reading of a value node's fields (`pse.product._values`): each check returns the field as the
JSON type it must be, or raises ValueError saying what is wrong. Shared by the codec and its table of
standard-library types (`pse.product._stdlib_values`), which read their nodes by the same rules.
Standard library only (the product process loads this module).
"""

from __future__ import annotations

from typing import Any

__all__ = ["as_int", "as_list", "exactly", "hex_int", "text"]


def exactly(items: object, n: int) -> list[Any]:
    if type(items) is not list or len(items) != n:
        raise ValueError(f"a node without its {n} field(s)")
    return items


def as_list(items: object) -> list[Any]:
    if type(items) is not list:
        raise ValueError("a payload that is not a list")
    return items


def as_int(value: object) -> int:
    if type(value) is not int:
        raise ValueError("not an int")
    return value


def hex_int(rest: list[Any]) -> int:
    (field,) = exactly(rest, 1)
    if type(field) is not str or not field.lstrip("-").isalnum():
        raise ValueError("an int that is not hex text")
    return int(field, 16)


def text(rest: list[Any]) -> str:
    (field,) = exactly(rest, 1)
    if type(field) is not str:
        raise ValueError("text that is not a string")
    return field
