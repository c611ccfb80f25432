"""The `direct` reference column: the bare model, one chat request per instance, no framework.

What a model does on its own is the figure a framework has to beat: an instance's PROBLEM is sent in
one request (temperature 0), the first fenced code block of the answer becomes `solution.py` (the
whole answer when it holds no fence; the problem's own `import`/`from` lines are put first when the
answer left them out, as the problem's module has them), and the instance's hidden check judges it,
exactly as it judges an arm's workspace. No tool, no test, no review: nothing is claimed, so a direct
row has a true-pass rate and no false-pass rate. `make eval-local` prints it beside the arms.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict

from pse.config import Settings
from pse.evals._hidden import run_hidden_check
from pse.evals._results import HiddenResult
from pse.evals._stats import wilson
from pse.evals._suite_model import Instance

__all__ = [
    "DIRECT_MAX_TOKENS",
    "DIRECT_PROMPT",
    "DirectRow",
    "ask_direct",
    "direct_solution",
    "direct_summary",
    "judge_direct",
]

DIRECT_MAX_TOKENS = 1024
"""Completion-token cap of a direct answer (a HumanEval function needs a few hundred)."""
DIRECT_PROMPT = (
    "Complete the following Python function. Answer with the complete function, and the imports it "
    "needs, in one Python code block.\n\n```python\n{problem}\n```"
)
"""The one message a direct request sends."""
_FENCE = re.compile(r"```[ \t]*[\w+.-]*[ \t]*\n(.*?)```", re.S)
_IMPORT = re.compile(r"^(?:import|from)\s+\S.*$", re.M)


class DirectRow(BaseModel):
    """One instance answered directly: the hidden check's result and what the answer cost."""

    model_config = ConfigDict(extra="forbid")

    instance: str
    passed: bool
    prompt_tokens: int
    completion_tokens: int
    wall_s: float
    answer: str
    hidden: HiddenResult


def direct_solution(problem: str, answer: str) -> str:
    """`solution.py` from a model's answer: its first fenced block (else the whole answer), with the
    problem's import lines first when the answer has not got them."""
    fenced = _FENCE.search(answer)
    code = fenced.group(1) if fenced is not None else answer
    missing = [line for line in _IMPORT.findall(problem) if line.strip() not in code]
    return "\n".join([*missing, code]).strip() + "\n" if missing else code.strip() + "\n"


async def ask_direct(base_url: str, model: str, problem: str, *, timeout_s: float) -> tuple[str, int, int]:
    """One chat request, temperature 0: (answer, prompt tokens, completion tokens).

    Raises:
        httpx.HTTPError: the server did not answer.
    """
    body = {
        "model": model,
        "messages": [{"role": "user", "content": DIRECT_PROMPT.format(problem=problem.rstrip())}],
        "temperature": 0,
        "max_tokens": DIRECT_MAX_TOKENS,
    }
    async with httpx.AsyncClient(timeout=timeout_s) as client:
        reply = await client.post(f"{base_url.rstrip('/')}/chat/completions", json=body)
    reply.raise_for_status()
    data: dict[str, Any] = reply.json()
    usage = data.get("usage") or {}
    text = str(data["choices"][0]["message"].get("content") or "")
    return text, int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))


def judge_direct(
    instance: Instance,
    answer: str,
    settings: Settings,
    *,
    hidden_dir: Path | None,
    secret_paths: Sequence[Path],
    timeout_s: float,
    tokens: tuple[int, int] = (0, 0),
    wall_s: float = 0.0,
) -> DirectRow:
    """Write the answer's `solution.py` into a fresh workspace and run the instance's hidden check on it."""
    with tempfile.TemporaryDirectory(prefix="pse-direct-") as folder:
        workspace = Path(folder) / "workspace"
        workspace.mkdir()
        workspace.chmod(0o755)  # the sandbox uid reads it
        (workspace / "solution.py").write_text(
            direct_solution(instance.problem or instance.inputs.get("PROBLEM", ""), answer), encoding="utf-8"
        )
        hidden = run_hidden_check(
            instance,
            workspace,
            settings,
            hidden_dir=hidden_dir,
            secret_paths=secret_paths,
            timeout_s=timeout_s,
        )
    return DirectRow(
        instance=instance.id,
        passed=hidden.passed,
        prompt_tokens=tokens[0],
        completion_tokens=tokens[1],
        wall_s=round(wall_s, 2),
        answer=answer,
        hidden=hidden,
    )


def direct_summary(rows: Sequence[DirectRow]) -> dict[str, Any]:
    """The direct column's figures: true passes with their 95 % Wilson interval, tokens and wall time."""
    passed = sum(r.passed for r in rows)
    tokens = sum(r.prompt_tokens + r.completion_tokens for r in rows)
    wall = sum(r.wall_s for r in rows)
    return {
        "instances": len(rows),
        "true_passes": passed,
        "true_pass_rate": passed / len(rows) if rows else None,
        "true_pass_rate_ci95": wilson(passed, len(rows)),
        "tokens": tokens,
        "tokens_per_true_pass": round(tokens / passed) if passed else None,
        "wall_s": round(wall, 1),
        "wall_s_per_true_pass": round(wall / passed, 1) if passed else None,
        "median_wall_s": sorted(r.wall_s for r in rows)[len(rows) // 2] if rows else None,
    }
