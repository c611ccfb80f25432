"""One validation error of a TOML file PSE reads, in people's words: where, what, and the fix.

`task.toml`, `rules.toml` and `registry.toml` are pydantic models with unknown keys forbidden. Pydantic
says "Extra inputs are not permitted" and "Input should be greater than or equal to 3"; a person wants
to read `unknown key 'limits.max_partial_retry'` with `did you mean 'max_partial_retries'?`, and
`limits.turns_per_cycle: 1 is out of range` with `it must be at least 3`. `explain` walks the model
along the error's location to find what was allowed there — the keys of the table, the values of a
choice, the bounds of a number — and names the closest one through `pse._suggest` (the same rule the
settings and the task names use).
"""

from __future__ import annotations

import enum
import types
from collections.abc import Sequence
from typing import Annotated, Any, Literal, NamedTuple, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from pse._suggest import did_you_mean

__all__ = ["Explained", "explain", "location_of", "range_words"]

_RANGE_ERRORS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal"})
_CHOICE_ERRORS = frozenset({"literal_error", "enum"})


class Explained(NamedTuple):
    """What one error says (`message`, led by its key) and how to fix it (`fix`)."""

    message: str
    fix: str


class _At(NamedTuple):
    """What the walk along a location found: the type there, the field it is (a model's field, else
    None), and whether the walk reached the end of the location."""

    annotation: Any
    field: FieldInfo | None
    reached: bool


def _unwrapped(annotation: Any) -> Any:
    """`X | None` → X; `Annotated[X, …]` → X (a union of several types is left as it is)."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            members = [a for a in get_args(annotation) if a is not type(None)]
            if len(members) != 1:
                return annotation
            annotation = members[0]
        else:
            return annotation


def _models_of(annotation: Any) -> list[type[BaseModel]]:
    """The models of a (discriminated) union, or [] when it is none."""
    annotation = _unwrapped(annotation)
    if get_origin(annotation) not in (Union, types.UnionType):
        return []
    return [m for m in get_args(annotation) if isinstance(m, type) and issubclass(m, BaseModel)]


def _tag_of(model: type[BaseModel]) -> str | None:
    kind = model.model_fields.get("kind")
    values = get_args(_unwrapped(kind.annotation)) if kind is not None else ()
    return str(values[0]) if len(values) == 1 else None


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _walk(model: type[BaseModel], loc: Sequence[str | int]) -> _At:
    """The type at the end of `loc` (a discriminated union's tag in `loc` picks its member)."""
    current: Any = model
    field: FieldInfo | None = None
    for part in loc:
        current = _unwrapped(current)
        members = _models_of(current)
        if members and isinstance(part, str):
            current = next((m for m in members if _tag_of(m) == part), None)
            if current is None:
                return _At(None, None, False)
            continue
        if _is_model(current):
            field = current.model_fields.get(str(part))
            if field is None:
                return _At(None, None, False)
            current = field.annotation
        elif get_origin(current) in (dict, list):
            current, field = get_args(current)[-1], None
        else:
            return _At(None, None, False)
    return _At(_unwrapped(current), field, True)


def _data_parts(model: type[BaseModel], loc: Sequence[str | int]) -> list[str | int]:
    """`loc` without the tags pydantic inserts for a discriminated union (`rules.1.threshold.op`)."""
    parts: list[str | int] = []
    current: Any = model
    for part in loc:
        current = _unwrapped(current)
        members = _models_of(current)
        if members and isinstance(part, str) and any(_tag_of(m) == part for m in members):
            current = next(m for m in members if _tag_of(m) == part)
            continue
        parts.append(part)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(str(part))
            current = field.annotation if field is not None else None
        elif get_origin(current) in (dict, list):
            current = get_args(current)[-1]
        else:
            current = None
    return parts


def location_of(model: type[BaseModel], loc: Sequence[str | int], raw: Any = None) -> str:
    """A location as a person finds it in the file: `limits.turns_per_cycle`, `rules[2] 'r2'.op`
    (a list item counted from 1, as people count `[[rules]]` tables, with its id when it has one)."""
    text, data = "", raw
    for part in _data_parts(model, loc):
        if isinstance(part, int):
            item = data[part] if isinstance(data, list) and part < len(data) else None
            ident = item.get("id") if isinstance(item, dict) else None
            text += f"[{part + 1}" + (f" {ident!r}" if isinstance(ident, str) else "") + "]"
            data = item
        else:
            text += ("." if text else "") + part
            data = data.get(part) if isinstance(data, dict) else None
    return text or "(file)"


def _table_of(where: str) -> str:
    if not where:
        return "the top level"
    return where if where.endswith("]") else f"[{where}]"  # a [[list]] item is named by its place


def _keys(model: type[BaseModel]) -> list[str]:
    return [field.alias or name for name, field in model.model_fields.items()]


def _unknown_key(model: type[BaseModel], err: ErrorDetails, raw: Any) -> Explained:
    parent_loc, name = err["loc"][:-1], str(err["loc"][-1])
    parent = _walk(model, parent_loc).annotation
    where = location_of(model, parent_loc, raw) if parent_loc else ""
    full = f"{where}.{name}" if where else name
    is_table = isinstance(err.get("input"), dict)
    what = f"unknown table [{full}]" if is_table else f"unknown key '{full}'"
    if not _is_model(parent):
        return Explained(what, "remove it or fix its spelling")
    allowed = _keys(parent)
    hint = did_you_mean(name, allowed, ("[" + (f"{where}." if where else "") + "{}]") if is_table else "{!r}")
    listed = f"{_table_of(where)} takes: {', '.join(allowed)}"
    return Explained(what, f"{hint} ({listed})" if hint else f"remove it or fix its spelling; {listed}")


def _choices(annotation: Any) -> list[str]:
    annotation = _unwrapped(annotation)
    if get_origin(annotation) is Literal:
        return [str(v) for v in get_args(annotation)]
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return [str(member.value) for member in annotation]
    return []


def _bounds(field: FieldInfo | None, err: ErrorDetails) -> list[tuple[str, Any]]:
    """The field's bounds in order (lower, then upper), from its metadata, else from the error."""
    found: list[tuple[str, Any]] = []
    for item in field.metadata if field is not None else []:
        for kind in ("gt", "ge", "lt", "le"):
            if isinstance(item, getattr(annotated_types, kind.capitalize())):
                found.append((kind, getattr(item, kind)))
    found += [(k, v) for k, v in (err.get("ctx") or {}).items() if k in ("gt", "ge", "lt", "le")]
    unique = dict(found)
    return sorted(unique.items(), key=lambda kv: kv[0] in ("lt", "le"))


def _number(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def range_words(bounds: Sequence[tuple[str, Any]]) -> str:
    """`at least 3`, `more than 0`, `more than 0 and at most 1`: what a bounded number must be."""
    words = {"gt": "more than", "ge": "at least", "lt": "less than", "le": "at most"}
    return " and ".join(f"{words[kind]} {_number(value)}" for kind, value in bounds)


def _value_words(bounds: Sequence[tuple[str, Any]]) -> str:
    """`3 or more`, `more than 0`, `a number more than 0 and at most 1`: a value that fits."""
    if len(bounds) != 1:
        return "a number " + range_words(bounds)
    kind, value = bounds[0]
    return {"ge": "{} or more", "le": "{} or less", "gt": "more than {}", "lt": "less than {}"}[kind].format(
        _number(value)
    )


def explain(model: type[BaseModel], err: ErrorDetails, raw: Any = None) -> Explained:
    """One pydantic error of `model`'s data as a message that names the key and a fix that suggests.

    Args:
        model: the model the data was validated against (`TaskConfig`, `RulesFile`, `RegistryFile`).
        err: one of `ValidationError.errors()`.
        raw: the data as read, to name list items by their id.
    """
    kind, got = err["type"], err.get("input")
    if kind == "extra_forbidden":
        return _unknown_key(model, err, raw)
    where = location_of(model, err["loc"], raw)
    at = _walk(model, err["loc"])
    if kind in _CHOICE_ERRORS and at.reached and (allowed := _choices(at.annotation)):
        hint = did_you_mean(str(got), allowed)
        listed = ", ".join(allowed)
        return Explained(
            f"{where}: {got!r} is not one of {listed}",
            f"{hint} (use one of: {listed})" if hint else f"use one of: {listed}",
        )
    if kind == "union_tag_invalid":
        ctx = err.get("ctx") or {}
        tags = [t.strip().strip("'") for t in str(ctx.get("expected_tags", "")).split(",") if t.strip()]
        key = str(ctx.get("discriminator", "kind")).strip("'")
        hint = did_you_mean(str(ctx.get("tag", "")), tags)
        listed = ", ".join(tags)
        return Explained(
            f"{where}: {key} {ctx.get('tag')!r} is not one of {listed}",
            f"{hint} (use one of: {listed})" if hint else f"use one of: {listed}",
        )
    if kind == "union_tag_not_found":
        key = str((err.get("ctx") or {}).get("discriminator", "kind")).strip("'")
        tags = [t for t in map(_tag_of, _models_of(at.annotation)) if t]
        return Explained(f"{where}: no {key}", f"set {key} = one of: {', '.join(tags)}")
    if kind in _RANGE_ERRORS:
        bounds = _bounds(at.field, err)
        return Explained(
            f"{where}: {_number(got)} is out of range (it must be {range_words(bounds)})",
            f"set {where} to {_value_words(bounds)}",
        )
    if kind in ("string_too_short", "too_short"):
        least = (err.get("ctx") or {}).get("min_length", 1)
        unit = "character" if kind == "string_too_short" else "item"
        empty = "empty" if not got else f"{got!r} is too short"
        return Explained(
            f"{where}: {empty} (it needs at least {least} {unit}{'s' if least != 1 else ''})",
            f"give {where} a value" if not got else f"lengthen {where}",
        )
    if kind == "missing":
        return Explained(f"{where}: required, and not given", f"add {where}")
    shown = "" if isinstance(got, dict | list) else f" (got {got!r})"
    return Explained(f"{where}: {err['msg']}{shown}", f"fix the value of {where}")
