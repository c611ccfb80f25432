"""The protocol: pure parsing and rendering of what roles and the ToolAgent write to each other.

No I/O here; the only PSE modules it uses are the leaf data modules `pse.events` and `pse.exceptions`.
"""

from pse.protocol._tags import find_blocked, parse_plan, parse_verdict, render_plan, strip_tool_traffic

__all__ = [
    "find_blocked",
    "parse_plan",
    "parse_verdict",
    "render_plan",
    "strip_tool_traffic",
]
