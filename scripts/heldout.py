"""Held-out tasks (bench/heldout): PSE as a new user runs it, against the same model asked once.

Each task of `bench/heldout/tasks` is a goal in plain words and a line per role, which no prompt of PSE
was tuned on. For each:

* **pse**: `pse run TASK --json` in a child process whose environment holds only what the README tells a
  user to set (`PSE_PROVIDER`, `PSE_BASE_URL`, `PSE_MODEL`) and where the tasks and runs are
  (`PSE_TASKS_DIR`, `PSE_RUNS_DIR`): every other setting is PSE's default for that model;
* **direct**: one chat request with the task's goal, temperature 0, its files read from the answer
  (`path` line and code block, or the first code block as the first expected output);

then the task's reference check (`bench/heldout/hidden/TASK.py`, which no role sees) judges the module the
run delivered, in a process of its own. The tasks also ask for tests: `tests_pass` says whether the test
file delivered passes on the module delivered beside it (pytest, in a folder holding those two files
only). One JSON row per (task, arm) goes to `OUT/rows.jsonl` (a row already there is kept: re-running
resumes) and the table is printed at the end.

    python scripts/heldout.py [--base-url URL | starts pse.local] [--model qwen2.5-coder-1.5b]
                              [--tasks a,b] [--arms pse,direct] [--out DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

import httpx

from pse.protocol import find_file_blocks

ROOT = Path(__file__).resolve().parents[1]
HELDOUT = ROOT / "bench" / "heldout"
DIRECT_ASK = (
    "{goal}\n\nAnswer with every file the task asks for: its name on a line of its own, then its whole "
    "content in a code block."
)
_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.S)
_NAMED_FENCE = re.compile(r"([^\n]*)\n+```[^\n]*\n(.*?)```", re.S)


def _tasks() -> dict[str, dict[str, Any]]:
    names = tomllib.loads((HELDOUT / "tasks" / "registry.toml").read_text())["tasks"]
    return {name: tomllib.loads((HELDOUT / "tasks" / name / "task.toml").read_text()) for name in names}


def _check(name: str, workspace: Path) -> tuple[bool, str]:
    """The task's reference check on a workspace, in a process of its own."""
    done = subprocess.run(
        [sys.executable, str(HELDOUT / "hidden" / f"{name}.py"), str(workspace)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=HELDOUT / "hidden",
    )
    tail = (done.stdout + done.stderr).strip().splitlines()
    return done.returncode == 0, tail[-1][:300] if tail else ""


def _tests_pass(task: dict[str, Any], workspace: Path) -> tuple[bool, str]:
    """Whether the delivered test file passes on the delivered module, with nothing else beside them."""
    module, tests = task["expected_outputs"][:2]
    with tempfile.TemporaryDirectory(prefix="heldout-tests-") as folder:
        for name in (module, tests):
            if not (workspace / name).is_file():
                return False, f"{name} was not delivered"
            (Path(folder) / name).write_bytes((workspace / name).read_bytes())
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", tests],
            capture_output=True, text=True, timeout=300, cwd=folder,
        )  # fmt: skip
    tail = done.stdout.strip().splitlines()
    return done.returncode == 0, tail[-1][:200] if tail else done.stderr[-200:]


def run_pse(name: str, task: dict[str, Any], url: str, model: str, out: Path) -> dict[str, Any]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/root"),
        "PSE_PROVIDER": "openai",
        "PSE_BASE_URL": url,
        "PSE_MODEL": model,
        "PSE_TASKS_DIR": str(HELDOUT / "tasks"),
        "PSE_RUNS_DIR": str(out / "runs"),
        # A checkout measured without installing it (`PYTHONPATH=its/src`): the child imports the same PSE.
        **({"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}),
    }
    started = time.monotonic()
    done = subprocess.run(
        [str(Path(sys.executable).with_name("pse")), "run", name, "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=out,
        timeout=3600,
    )
    wall = time.monotonic() - started
    text = done.stdout.strip()
    try:
        summary = json.loads(text[text.rfind("\n{") + 1 :] if "\n{" in text else text)
    except ValueError:
        return {"task": name, "arm": "pse", "error": (done.stderr or text)[-500:], "wall_s": round(wall, 1)}
    workspace = Path(summary["trace"]).parent / "workspace"
    passed, why = _check(name, workspace)
    tests_pass, tests_why = _tests_pass(task, workspace)
    trace = json.loads(Path(summary["trace"]).read_text())
    turns = sum(len(c["messages"]) for c in trace["cycles"])
    return {
        "task": name,
        "arm": "pse",
        "outcome": summary["outcome"],
        "reason": summary.get("outcome_reason", "")[:200],
        "claimed": summary["outcome"] == "PASSED",
        "passed": passed,
        "check": why,
        "tests_pass": tests_pass,
        "tests": tests_why,
        "cycles": summary["cycles"],
        "turns": turns,
        "tokens": summary["tokens"]["total"] if isinstance(summary["tokens"], dict) else summary["tokens"],
        "wall_s": round(wall, 1),
        "run": Path(summary["trace"]).parent.name,
    }


def run_direct(name: str, task: dict[str, Any], url: str, model: str, out: Path) -> dict[str, Any]:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": DIRECT_ASK.format(goal=task["goal"].strip())}],
        "temperature": 0,
        "max_tokens": 2048,
    }
    started = time.monotonic()
    reply = httpx.post(f"{url.rstrip('/')}/chat/completions", json=body, timeout=1800)
    wall = time.monotonic() - started
    reply.raise_for_status()
    data = reply.json()
    answer = str(data["choices"][0]["message"].get("content") or "")
    usage = data.get("usage") or {}
    with tempfile.TemporaryDirectory(prefix="heldout-direct-") as folder:
        workspace = Path(folder)
        blocks = [b for b in find_file_blocks(answer) if b.closed and "/" not in b.path.strip("./")]
        for block in blocks:
            (workspace / Path(block.path).name).write_text(block.content)
        for heading, content in _NAMED_FENCE.findall(answer):  # `### test_x.py` then a code block
            named = re.findall(r"[\w.-]+\.py\b", heading)
            if named and not (workspace / named[-1]).exists():
                (workspace / named[-1]).write_text(content)
        module = task["expected_outputs"][0]
        if not (workspace / module).exists():
            fenced = _FENCE.search(answer)
            (workspace / module).write_text(fenced.group(1) if fenced else answer)
        passed, why = _check(name, workspace)
        tests_pass, tests_why = _tests_pass(task, workspace)
    return {
        "task": name,
        "arm": "direct",
        "passed": passed,
        "check": why,
        "tests_pass": tests_pass,
        "tests": tests_why,
        "tokens": int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0)),
        "wall_s": round(wall, 1),
        "answer": answer,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default=None, help="a running server (else pse.local is started)")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--tasks", default=None, help="comma-separated names (default: all)")
    parser.add_argument("--arms", default="direct,pse")
    parser.add_argument("--out", type=Path, default=ROOT / "evals" / "heldout")
    args = parser.parse_args(argv)
    tasks = _tasks()
    names = args.tasks.split(",") if args.tasks else list(tasks)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    rows_file = out / "rows.jsonl"
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()] if rows_file.is_file() else []
    done = {(r["task"], r["arm"]) for r in rows}
    server: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
    if args.base_url is None:
        from pse.local import LocalServer, local_model

        server = LocalServer([local_model(args.model)], log=out / "server.log")
    with server as started:
        url = args.base_url or started.url
        for name in names:
            for arm in args.arms.split(","):
                if (name, arm) in done:
                    continue
                row = (
                    run_pse(name, tasks[name], url, args.model, out)
                    if arm == "pse"
                    else run_direct(name, tasks[name], url, args.model, out)
                )
                rows.append(row)
                with rows_file.open("a") as stream:
                    stream.write(json.dumps(row) + "\n")
                shown = {k: v for k, v in row.items() if k != "answer"}
                print(json.dumps(shown), flush=True)
    for arm in args.arms.split(","):
        mine = [r for r in rows if r["arm"] == arm and r["task"] in names]
        true = sum(1 for r in mine if r.get("passed"))
        claimed = sum(1 for r in mine if r.get("claimed"))
        false = sum(1 for r in mine if r.get("claimed") and not r.get("passed"))
        whole = sum(1 for r in mine if r.get("passed") and r.get("tests_pass"))
        print(
            f"{arm}: {true}/{len(mine)} right by the reference check"
            + f", {whole} with its own tests passing on it"
            + (f", {claimed} claimed, {false} false" if arm == "pse" else "")
            + f", {sum(r.get('tokens', 0) for r in mine)} tokens"
            + f", {sum(r.get('wall_s', 0) for r in mine):.0f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
