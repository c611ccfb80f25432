"""The typed shapes the dashboard API accepts and returns (JSON)."""

from __future__ import annotations

import re
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pse.config import ProviderName
from pse.evals import EvalSummary, ResultRow
from pse.events import ApprovalRecord
from pse.history import RunEntry, Stats
from pse.web._catalog import RunFacts, SearchHit
from pse.web._security import is_loopback_host

__all__ = [
    "APPROVAL_ID",
    "CASSETTE_NAME",
    "OUTCOME_FILTERS",
    "ApprovalRequest",
    "ApprovalResponse",
    "EvalArmRates",
    "EvalListItem",
    "EvalPage",
    "InputInfo",
    "MetricsResponse",
    "PendingApproval",
    "RunListItem",
    "RunPage",
    "StartRun",
    "StartedRun",
    "TaskInfo",
]

CASSETTE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}\.json$")
"""A cassette is named, never pathed: a file of this name directly inside the task's folder."""
APPROVAL_ID = r"^A[0-9]{1,6}\.[0-9]{1,6}$"
"""A held call's id, `A<cycle>.<n>`: checked in the URL before anything is looked up."""
_MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}$")
_INPUT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
MAX_INPUT_CHARS = 20_000
OUTCOME_FILTERS = ("PASSED", "ESCALATED", "ACCEPTED_BY_HUMAN", "TIMEOUT", "ERROR", "RUNNING")


class StartRun(BaseModel):
    """`POST /api/runs`: which task, its inputs, and the model options a browser may choose.

    `base_url` must point at a loopback server (a local vLLM, llama.cpp or Ollama): the server's API key
    goes to that URL, so a remote one would hand the key to whoever runs it. Recording is not offered.
    """

    model_config = ConfigDict(extra="forbid")

    task: str = Field(pattern=r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$", max_length=64)
    inputs: dict[str, str] = Field(default_factory=dict, max_length=32)
    provider: ProviderName | None = None
    model: str | None = Field(None, pattern=_MODEL_NAME.pattern)
    base_url: str | None = Field(None, max_length=300)
    cassette: str | None = Field(None, pattern=CASSETTE_NAME.pattern)
    repo: str | None = Field(
        None, max_length=4096, description="a repository the server allows (`pse serve --repo PATH`)"
    )
    base: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9_][A-Za-z0-9._/@{}~^-]{0,199}$",
        description="the ref the run's worktree starts from (default HEAD); with `repo`",
    )

    @field_validator("inputs")
    @classmethod
    def _inputs(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            if not _INPUT_NAME.match(name):
                raise ValueError(f"input name {name!r} must be letters, digits, '_' or '-'")
            if len(text) > MAX_INPUT_CHARS:
                raise ValueError(f"input {name!r} is longer than {MAX_INPUT_CHARS} characters")
        return value

    @field_validator("base_url")
    @classmethod
    def _loopback_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not is_loopback_host(parts.hostname or ""):
            raise ValueError(
                "base_url must be an http(s) URL on this machine (127.0.0.1, ::1 or localhost); "
                "configure remote providers with PSE_BASE_URL on the server instead"
            )
        if parts.username or parts.password:
            raise ValueError("base_url may not carry credentials")
        return value


class Repositories(BaseModel):
    """`GET /api/repositories`: the git repositories the Start form may work on (`pse serve --repo`)."""

    repositories: list[str]


class StartedRun(BaseModel):
    """The answer to `POST /api/runs`."""

    run_id: str
    task: str
    events: str = Field(description="URL of the run's SSE stream")


class InputInfo(BaseModel):
    """One input a task declares."""

    name: str
    description: str
    default: str | None
    required: bool


class TaskInfo(BaseModel):
    """One entry of `GET /api/tasks`."""

    name: str
    description: str
    inputs: list[InputInfo]
    cassettes: list[str]
    valid: bool
    problems: list[str] = Field(
        default_factory=list, description="why an invalid task cannot start: each problem and its fix"
    )
    warnings: list[str] = Field(
        default_factory=list,
        description="why a valid task may not run as it stands (no cassette and no model on this server, a "
        "cassette that never writes an expected output)",
    )


class RunListItem(RunEntry):
    """A history line plus whether it is executing in this server now, and what its trace says."""

    live: bool = False
    duration_s: float | None = Field(None, description="from started_at to ended_at; None while it runs")
    infrastructure_error: bool = Field(
        False, description="ERROR for a reason outside the run: the model down, cancelled, ... (metrics)"
    )
    facts: RunFacts | None = Field(None, description="provider, model, sandbox...; None: trace unreadable")
    match: SearchHit | None = Field(None, description="with `q`: where the search matched")


class AnswerRequest(BaseModel):
    """`POST /api/runs/{id}/answer`: a person's answer to an ESCALATED run (see `pse answer`)."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["resume", "accept", "reject"] = "resume"
    note: str | None = Field(None, max_length=2000)
    text: str | None = Field(
        None, max_length=2000, description="the answers to a waiting Planner's questions"
    )
    grants: list[str] = Field(default_factory=list, max_length=20)
    retries: int = Field(1, ge=1, le=20)
    replan: bool = False


class ApprovalRequest(BaseModel):
    """`POST /api/runs/{id}/approvals/{approval_id}`: a person's decision on a held call (`pse approve`)."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "deny"]
    reason: str = Field("", max_length=2000, description="why; a denial's reason goes back to the role")
    all: bool = Field(False, description="approve every later call of the same role, tool and rule too")


class ApprovalResponse(BaseModel):
    """The answer to a decision on a held call."""

    run_id: str
    approval: str = Field(description="the held call's id")
    decision: Literal["approved", "denied"]
    resumed: bool = Field(description="nobody executed the run: it resumed in this server")
    events: str | None = Field(None, description="URL of the run's SSE stream while it executes here")


class PendingApproval(ApprovalRecord):
    """One entry of `GET /api/approvals`: a held call nobody decided yet, with its run."""

    run_id: str
    task: str
    live: bool = Field(False, description="the run executes in this server")


class RunPage(BaseModel):
    """One page of `GET /api/runs`, newest first."""

    total: int
    offset: int
    limit: int
    runs: list[RunListItem]
    query: str | None = Field(None, description="the search, when there was one")
    text_searched: int | None = Field(
        None, description="with `q`: how many runs' message text was read (the newest, at most 1000)"
    )
    text_search_limit: int | None = None


class MetricsResponse(Stats):
    """`GET /api/stats`: the aggregates plus the series the metrics page draws."""

    cycles_to_pass: dict[str, int] = Field(description="passed runs by number of cycles")
    series: list[RunListItem] = Field(description="finished runs, oldest first (at most the last 500)")
    infrastructure_errors: int = Field(
        0, description="finished runs that ended ERROR for a reason outside the run (model down, cancelled)"
    )
    judged_runs: int = Field(0, description="finished runs minus the infrastructure errors")
    pass_rate: float | None = Field(None, description="PASSED of the judged runs")
    judged_first_cycle_pass_rate: float | None = Field(
        None, description="passed in their first cycle, of the judged runs"
    )


class EvalArmRates(BaseModel):
    """One arm's headline figures in the evaluations list."""

    instances: int
    true_pass_rate: float | None
    true_pass_rate_ci95: tuple[float, float] | None
    false_pass_rate: float | None
    false_pass_rate_ci95: tuple[float, float] | None


class EvalListItem(BaseModel):
    """One entry of `GET /api/evals`: an evaluation folder with a readable eval.json."""

    eval_id: str = Field(description="the folder's name: the id in /api/evals/{eval_id}")
    suite: str
    task: str
    description: str
    arms: list[str]
    instances: int = Field(description="instances eval.json plans")
    finished_instances: int = Field(description="instances with at least one finished arm")
    updated_at: str
    rates: dict[str, EvalArmRates] = Field(description="arm → its true and false pass rates")


class EvalPage(BaseModel):
    """`GET /api/evals/{eval_id}`: eval.json, the summary, and the rows it counts (last per instance, arm)."""

    meta: dict[str, Any]
    summary: EvalSummary
    rows: list[ResultRow]


Outcome = Literal["PASSED", "ESCALATED", "TIMEOUT", "ERROR", "ACCEPTED_BY_HUMAN", "RUNNING"]
