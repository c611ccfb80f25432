"""The grammar of a `<tool_calls>` block: each granted tool's `<invoke>`, its parameters, their values."""

from __future__ import annotations

import re

from pse.protocol._budget import GrammarSizes
from pse.protocol._gbnf import avoiding, chunked, literal, repeat
from pse.protocol._types import ParamSpec, ToolSignature

__all__ = ["call_rules", "open_tag"]

_ANY_ORDER_PARAMS = 4  # up to this many parameters, any order (2**n rules); more: declared order
_RULE_CHARS = re.compile(r"[^A-Za-z0-9]+")


def open_tag(tag: str, **attributes: str) -> str:
    """The literal of an opening tag with fixed attribute values."""
    attrs = "".join(f' {key}="{value}"' for key, value in attributes.items())
    return literal(f"<{tag}{attrs}>")


def call_rules(tools: tuple[ToolSignature, ...], sizes: GrammarSizes) -> list[str]:
    """`calls`: a `<tool_calls>` block of up to `sizes.invokes` invokes, each of a granted tool."""
    more = f" ( invoke ws ){{0,{sizes.invokes - 1}}}" if sizes.invokes > 1 else ""
    names = [f"tool-{i}-{_RULE_CHARS.sub('-', t.name).strip('-')}" for i, t in enumerate(tools, 1)]
    short = sizes.short if sizes.value is not None else None
    rules = [
        f"calls ::= {open_tag('tool_calls')} ws invoke ws{more} {literal('</tool_calls>')}",
        f"invoke ::= {' | '.join(names)}",
        *_value_rules(sizes.value),
        *_short_rules(tools, short),
    ]
    for name, tool in zip(names, tools, strict=True):
        rules += _invoke_rules(name, tool, sizes.short if sizes.value is not None else None)
    return rules


_RAW_PIECES = (("[^<]", 1), ('"<" [^<!/]', 2), ('"<<" [^<!/]', 3))
_CDATA_PIECES = (("[^\\]]", 1), ('"]" [^\\]>]', 2), ('"]]" [^\\]>]', 3))


def _value_rules(chars: int | None) -> list[str]:
    """`value`: a parameter's raw text, or CDATA sections; at most `chars` characters when bounded.

    Unbounded, raw text never holds `</parameter` or `<![CDATA[` and CDATA never `]]>` (automata).
    Bounded, raw text holds no `</` or `<!` at all, and each `<` or `<<` is followed by another character
    (a heredoc's `<<` stays possible); one CDATA section holds no `]]>`. Both are counted in characters
    (`chunked`), so a bound of a few thousand characters needs no repetition llama.cpp refuses.
    """
    space = "[ \\t\\r\\n]{0,16}"
    if chars is None:
        return [
            f'value ::= raw | {space} ( "<![CDATA[" cdata "]]>" )+ {space}',
            *avoiding("raw", ["</parameter", "<![CDATA["]),
            *avoiding("cdata", ["]]>"]),
        ]
    return [
        f'value ::= raw | {space} "<![CDATA[" cdata "]]>" {space}',
        *chunked("raw", _RAW_PIECES, chars),
        *chunked("cdata", _CDATA_PIECES, chars),
    ]


def _value(param: ParamSpec, short: int | None) -> str:
    """A parameter's value: `value`, or (bounded, a short parameter) a few characters of any but `<`, the
    first visible: a path, a name or a count given is never empty (an optional one may be left out)."""
    if short is None or param.max_chars is None:
        return "value"
    return f"short-{min(param.max_chars, short)}"


def _short_rules(tools: tuple[ToolSignature, ...], short: int | None) -> list[str]:
    """`short-N` for each bound of a short parameter: a visible character, then up to N - 1 but `<`."""
    if short is None:
        return []
    rules = []
    for most in sorted({min(p.max_chars, short) for t in tools for p in t.params if p.max_chars is not None}):
        rest, more = repeat("[^<]", most - 1, f"short-{most}-rest")
        rules += [f"short-{most} ::= [^< \\t\\r\\n] {rest}", *more]
    return rules


def _invoke_rules(name: str, tool: ToolSignature, short: int | None) -> list[str]:
    """`name`: one `<invoke>` of `tool` with exactly its parameters, the required ones present."""
    params = tool.params
    rules = [
        f"{name}-{i} ::= {open_tag('parameter', name=p.name)} {_value(p, short)} {literal('</parameter>')} ws"
        for i, p in enumerate(params)
    ]
    if len(params) <= _ANY_ORDER_PARAMS:
        args, more = _any_order(name, params)
        rules += more
    else:
        args = " ".join(f"{name}-{i}" if p.required else f"( {name}-{i} )?" for i, p in enumerate(params))
    rules.append(f"{name} ::= {open_tag('invoke', name=tool.name)} ws {args} {literal('</invoke>')}")
    return rules


def _any_order(name: str, params: tuple[ParamSpec, ...]) -> tuple[str, list[str]]:
    """The parameters in any order, each at most once, every required one present: one rule per subset.

    Returns the expression for all parameters and the rules it needs (`name-args-MASK`: MASK the bit
    set of the parameters still to come).
    """
    full = (1 << len(params)) - 1
    if not full:
        return "", []
    rules = []
    for mask in range(1, full + 1):
        options = [
            f"{name}-{i}" + (f" {name}-args-{mask & ~(1 << i)}" if mask & ~(1 << i) else "")
            for i in range(len(params))
            if mask & (1 << i)
        ]
        if not any(params[i].required for i in range(len(params)) if mask & (1 << i)):
            options.append('""')
        rules.append(f"{name}-args-{mask} ::= {' | '.join(options)}")
    return f"{name}-args-{full}", rules
