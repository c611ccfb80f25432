"""What the live view and `pse trace show` make of a role's message: what it amounts to, never its XML."""

from __future__ import annotations

import pytest

from pse._describe import describe_message


@pytest.mark.parametrize(
    ("role", "content", "line"),
    [
        (
            "Specialist",
            'I write it.\n<tool_calls>\n<invoke name="write_file">\n<parameter name="path">p.md</parameter>\n'
            '<parameter name="content"><plan><goal>quoted</goal></plan></parameter>\n</invoke>\n</tool_calls>',
            "I write it. → write_file",  # a tag inside a written file is not the role's plan
        ),
        ("Specialist", "<report>\nArtifacts: a.py\nEvidence: ok\n</report>", "report: Artifacts: a.py"),
        (
            "Planner",
            '<blocked reason_code="MISSING_DATA">no logs for 10:00-10:20</blocked>',
            "blocked (MISSING_DATA): no logs for 10:00-10:20",
        ),
        (
            "Evaluator",
            '<verdict status="PASS">no reason code</verdict>',
            "unreadable: verdict: found no <reason_code> element(s)",
        ),
        ("Specialist", "Half a request <tool_calls><invoke name=", "Half a request → a tool"),
    ],
)
def test_a_message_is_what_it_amounts_to(role: str, content: str, line: str) -> None:
    said = describe_message(role, content)
    assert said.startswith(line), said
    assert "<" not in said.replace("<reason_code>", "")
    assert describe_message(role, "if a <b then c") == "if a <b then c"  # prose keeps its `<`
