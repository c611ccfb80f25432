"""Hard check of incident-review (`run_check(name="evidence_index")`), run in the run workspace.

Checks that `evidence_index.json` matches its schema (`evidence_index.schema.json` is generated from the
model below: `python checks/check_evidence.py --print-schema`), that ids are unique and references
resolve, that every fact or ruled-out cause rests on two or more independent kinds of evidence, that each
evidence source file exists, and that every `[E<n>]` reference in `incident_report.md` is in the index.
Exit 0 with a one-line summary, or 1 with every problem listed.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

REPORT, INDEX = Path("incident_report.md"), Path("evidence_index.json")
INDEPENDENT_KINDS = {
    "metrics",
    "logs",
    "db_pool",
    "releases",
}  # knowledge is background, not evidence of this incident


class Evidence(BaseModel):
    """One observation in the data, pinned to where it can be checked."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^E[1-9][0-9]*$", description="E1, E2, ...; cited in the report as [E1]")
    kind: Literal["metrics", "logs", "db_pool", "releases", "knowledge"]
    source: str = Field(min_length=1, description="workspace file the observation comes from")
    locator: str = Field(min_length=1, description="rows, lines, time range or field within the source")
    observation: str = Field(min_length=1, description="what the data shows, with numbers")


class Conclusion(BaseModel):
    """A statement of the report and the evidence it rests on."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^C[1-9][0-9]*$")
    statement: str = Field(min_length=1)
    status: Literal["fact", "hypothesis", "ruled_out"]
    evidence: list[str] = Field(min_length=1, description="ids of the evidence items it rests on")


class EvidenceIndex(BaseModel):
    """The evidence index of an incident report."""

    model_config = ConfigDict(extra="forbid", title="evidence_index.json")

    incident: str = Field(min_length=1)
    evidence: list[Evidence] = Field(min_length=1)
    conclusions: list[Conclusion] = Field(min_length=1)


def problems_of(workspace: Path) -> list[str]:
    """Every problem of the two deliverables in `workspace` (empty when they pass)."""
    index_path, report_path = workspace / INDEX, workspace / REPORT
    if not index_path.is_file():
        return [f"{INDEX}: missing; write it in the workspace root"]
    try:
        index = EvidenceIndex.model_validate_json(index_path.read_text(encoding="utf-8"))
    except ValidationError as exc:
        return [f"{INDEX}: {'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}" for e in exc.errors()]
    problems: list[str] = []
    by_id = {item.id: item for item in index.evidence}
    for ids, what in (
        ([e.id for e in index.evidence], "evidence"),
        ([c.id for c in index.conclusions], "conclusion"),
    ):
        problems += [
            f"{INDEX}: {what} id {i} is used more than once"
            for i in sorted({i for i in ids if ids.count(i) > 1})
        ]
    for item in index.evidence:
        if not (workspace / item.source).is_file():
            problems.append(f"{INDEX}: {item.id}.source {item.source!r} is not a file in the workspace")
    for c in index.conclusions:
        unknown = [ref for ref in c.evidence if ref not in by_id]
        if unknown:
            problems.append(f"{INDEX}: conclusion {c.id} cites unknown evidence {', '.join(unknown)}")
        kinds = {by_id[ref].kind for ref in c.evidence if ref in by_id} & INDEPENDENT_KINDS
        if c.status != "hypothesis" and len(kinds) < 2:
            problems.append(
                f"{INDEX}: conclusion {c.id} ({c.status}) rests on {len(kinds)} independent evidence kind(s) "
                f"({', '.join(sorted(kinds)) or 'none'}); a fact or ruled-out cause needs two of "
                f"{', '.join(sorted(INDEPENDENT_KINDS))}, or mark it a hypothesis"
            )
    if not report_path.is_file():
        return [*problems, f"{REPORT}: missing; write it in the workspace root"]
    cited = re.findall(r"\[(E[0-9]+)\]", report_path.read_text(encoding="utf-8"))
    if not cited:
        problems.append(f"{REPORT}: cites no evidence; reference index items as [E1], [E2], ...")
    problems += [
        f"{REPORT}: cites [{ref}], which is not in {INDEX}" for ref in sorted(set(cited) - set(by_id))
    ]
    return problems


def main(argv: list[str]) -> int:
    if argv[1:] == ["--print-schema"]:
        print(json.dumps(EvidenceIndex.model_json_schema(), indent=2))
        return 0
    problems = problems_of(Path.cwd())
    if problems:
        print(f"evidence check: {len(problems)} problem(s)")
        print("\n".join(f"- {p}" for p in problems))
        return 1
    index = json.loads((Path.cwd() / INDEX).read_text(encoding="utf-8"))
    counts = f"{len(index['evidence'])} evidence items, {len(index['conclusions'])} conclusions"
    print(f"evidence check: ok ({counts})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
