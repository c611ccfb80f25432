"""The protocol: pure parsing and rendering of what roles and the ToolAgent write to each other.

No I/O here; the only PSE modules it uses are the leaf data modules `pse.events` and `pse.exceptions`.
"""

from pse.protocol._dsml import (
    DsmlError,
    ParamSpec,
    ParsedMessage,
    ToolCall,
    ToolSignature,
    has_tool_calls,
    parse_tool_calls,
    render_tool_calls,
)
from pse.protocol._results import ResultItem, parse_tool_results, render_tool_results, truncate_text
from pse.protocol._tags import find_blocked, parse_plan, parse_verdict, render_plan, strip_tool_traffic

__all__ = [
    "DsmlError",
    "ParamSpec",
    "ParsedMessage",
    "ResultItem",
    "ToolCall",
    "ToolSignature",
    "find_blocked",
    "has_tool_calls",
    "parse_plan",
    "parse_tool_calls",
    "parse_tool_results",
    "parse_verdict",
    "render_plan",
    "render_tool_calls",
    "render_tool_results",
    "strip_tool_traffic",
    "truncate_text",
]
