"""`pse batch`: inputs files, the store's leases, resuming, and the local and Ray executors, with a worker
killed for real mid-batch."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_support import pse
from pg_support import needs_postgres, postgres_server, postgres_url  # noqa: F401  (fixtures)
from pse.batch import BatchRun, LocalExecutor, RayExecutor, read_rows, run_batch
from pse.config import Settings, load_settings
from pse.exceptions import UserError
from pse.runner import registry_for
from pse.store import RunFilter, RunStore, open_store
from pse.trace import load_trace
from sandbox_support import needs_fallback

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'pse[ray]')")


def _settings(runs: Path, **extra: object) -> Settings:
    return load_settings(runs_dir=runs, sandbox="fallback", **extra)  # type: ignore[arg-type]


def _plan(settings: Settings, rows: int, executor: object, **kw: object) -> BatchRun:
    task = registry_for(settings).get("code-delivery")
    return BatchRun(task=task, rows=[{}] * rows, settings=settings, executor=executor, **kw)  # type: ignore[arg-type]


def _finished(settings: Settings, batch_id: str) -> list[str]:
    store = open_store(settings)
    return [e.run_id for e in store.entries(RunFilter(tags=(("batch", batch_id),), finished=True))]


# ---- inputs ---------------------------------------------------------------------------------------------


def test_inputs_files_report_every_problem_at_once(tmp_path: Path) -> None:
    task = registry_for(load_settings()).get("incident-review")
    good = tmp_path / "ok.csv"
    good.write_text("service\nlatency\n\nerrors\n")
    assert read_rows(good, task) == [{"service": "latency"}, {"service": "errors"}]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"service": "x"}\nnot json\n[1]\n{"nope": "y"}\n{"service": {"a": 1}}\n')
    with pytest.raises(UserError) as info:
        read_rows(bad, task)
    message = str(info.value)
    assert "4 problem(s), nothing was run" in message
    for fragment in ("line 2: not JSON", "line 3: a JSON object", "line 4: task 'incident-review' has no input nope; its inputs are: service", "line 5: input(s) ['service']"):  # fmt: skip
        assert fragment in message
    with pytest.raises(UserError, match=r"give a \.jsonl file"):
        read_rows(tmp_path / "rows.txt", task)
    with pytest.raises(UserError, match="no such file"):
        read_rows(tmp_path / "missing.jsonl", task)
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("focus\na,b\n")
    with pytest.raises(UserError, match="line 2: 2 value"):
        read_rows(ragged, task)


# ---- leases --------------------------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=needs_postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> RunStore:
    url = (
        f"sqlite:///{tmp_path / 's.sqlite3'}"
        if request.param == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    opened = open_store(load_settings(runs_dir=tmp_path, store_url=url))
    return opened


def test_a_lease_is_held_by_one_worker_until_it_lapses(store: RunStore) -> None:
    assert store.open_batch("b", "t", "x", [{"A": "1"}])  # type: ignore[attr-defined]
    assert not store.open_batch("b", "t", "x", [{"A": "1"}])  # type: ignore[attr-defined]  # the same: resumes
    with pytest.raises(UserError, match="started with other rows"):
        store.open_batch("b", "t", "x", [{"A": "2"}])  # type: ignore[attr-defined]
    first = store.claim("b", 0, "w1", 1.0)  # type: ignore[attr-defined]
    assert first is not None and (first.owner, first.attempts, first.status) == ("w1", 1, "running")
    assert store.claim("b", 0, "w2", 1.0) is None  # type: ignore[attr-defined]  # held
    assert store.renew("b", 0, "w1", 1.0) and not store.renew("b", 0, "w2", 1.0)  # type: ignore[attr-defined]
    time.sleep(1.1)
    taken = store.claim("b", 0, "w2", 5.0)  # type: ignore[attr-defined]  # lapsed: taken over
    assert taken is not None and (taken.owner, taken.attempts) == ("w2", 2)
    assert not store.renew("b", 0, "w1", 1.0)  # type: ignore[attr-defined]  # the old holder knows it lost it
    assert not store.finish("b", 0, "w1", done=True)  # type: ignore[attr-defined]
    assert store.finish("b", 0, "w2", done=True)  # type: ignore[attr-defined]
    assert store.claim("b", 0, "w3", 1.0) is None  # type: ignore[attr-defined]  # done: never run again


# ---- the local executor ---------------------------------------------------------------------------------


def test_a_local_batch_runs_each_row_once_and_a_second_call_runs_nothing(tmp_path: Path) -> None:
    settings = _settings(tmp_path / "runs")
    summary = asyncio.run(run_batch(_plan(settings, 4, LocalExecutor(2))))
    assert (summary.rows, summary.done, summary.outcomes, summary.skipped) == (4, 4, {"PASSED": 4}, 0)
    demo = json.loads((Path(__file__).parent / "data" / "reference_traces.json").read_text())["code-delivery"]
    assert summary.tokens == 4 * demo["tokens"]["total"]  # each run is the demo's two cycles, to the token
    assert len(_finished(settings, summary.batch_id)) == 4
    folders = sorted(p.name for p in (tmp_path / "runs").iterdir() if p.is_dir())
    again = asyncio.run(run_batch(_plan(settings, 4, LocalExecutor(2))))
    assert (again.batch_id, again.skipped, again.done) == (summary.batch_id, 4, 4)
    assert sorted(p.name for p in (tmp_path / "runs").iterdir() if p.is_dir()) == folders  # nothing new ran
    stored = open_store(settings).batch_summary(summary.batch_id)  # type: ignore[attr-defined]
    assert stored is not None and stored["skipped"] == 4


def test_an_interrupted_batch_resumes_its_runs_from_their_last_cycle(tmp_path: Path) -> None:
    settings = _settings(tmp_path / "runs", scripted_latency_s=0.3)
    plan = _plan(settings, 3, LocalExecutor(3), tag="stopped")

    async def stop_soon() -> None:
        task = asyncio.create_task(run_batch(plan))
        deadline = time.monotonic() + 120
        while not _started(tmp_path / "runs", cycles=1, count=3):
            assert time.monotonic() < deadline and not task.done(), "the batch's runs never started a cycle"
            await asyncio.sleep(0.05)
        plan.cancel()  # each run ends at its next cycle boundary, CANCELLED
        summary = await task
        assert summary.interrupted and summary.done == 0

    asyncio.run(stop_soon())
    interrupted = sorted(p.name for p in (tmp_path / "runs").iterdir() if p.is_dir())
    assert len(interrupted) == 3
    summary = asyncio.run(run_batch(_plan(settings, 3, LocalExecutor(3), tag="stopped")))
    assert (summary.done, summary.outcomes, summary.resumed) == (3, {"PASSED": 3}, 3)
    assert sorted(p.name for p in (tmp_path / "runs").iterdir() if p.is_dir()) == interrupted  # no run redone
    for name in interrupted:
        trace = load_trace(tmp_path / "runs" / name)
        assert (trace.outcome, trace.resumed, len(trace.cycles)) == ("PASSED", 1, 2)


def _started(runs: Path, *, cycles: int, count: int) -> bool:
    done = 0
    for trace in runs.glob("*/trace.json"):
        try:
            if len(json.loads(trace.read_text()).get("cycles", [])) >= cycles:
                done += 1
        except ValueError:
            continue
    return done >= count


@needs_fallback
def test_a_killed_driver_leaves_rows_the_next_call_takes_over(tmp_path: Path) -> None:
    """`pse batch` killed with SIGKILL (no chance to release its leases): the next call waits for them
    to lapse, resumes the runs it had started, and every row ends done exactly once."""
    rows = tmp_path / "rows.jsonl"
    rows.write_text("{}\n" * 3)
    env = {**os.environ, "PSE_SANDBOX": "fallback", "PSE_SCRIPTED_LATENCY_S": "0.3"}
    command = [str(Path(sys.executable).parent / "pse"), "batch", "code-delivery", "--inputs", str(rows), "--runs-dir",
               str(tmp_path / "runs"), "--tag", "killed", "--lease-s", "3", "--json"]  # fmt: skip
    first = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + 120
    while not _started(tmp_path / "runs", cycles=1, count=3) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(30)
    started = sorted(p.name for p in (tmp_path / "runs").iterdir() if p.is_dir())
    second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    summary = json.loads(second.stdout)
    assert (summary["done"], summary["outcomes"], summary["resumed"]) == (3, {"PASSED": 3}, 3)
    assert sorted(p.name for p in (tmp_path / "runs").iterdir() if p.is_dir()) == started
    assert [r["attempts"] for r in summary["runs"]] == [2, 2, 2]


@needs_fallback
def test_pse_batch_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = tmp_path / "rows.csv"
    rows.write_text("nope\nx\n")
    code, _, stderr = pse(monkeypatch, capsys, "batch", "code-delivery", "--inputs", str(rows))
    assert code == 2 and "line 2: task 'code-delivery' takes no inputs, and was given nope" in stderr
    rows.write_text("\n")
    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_text("{}\n{}\n")
    monkeypatch.setenv("PSE_SANDBOX", "fallback")
    code, stdout, _ = pse(monkeypatch, capsys, "batch", "code-delivery", "--inputs", str(jsonl), "--runs-dir",
                          str(tmp_path / "runs"), "--json", "--tag", "cli")  # fmt: skip
    summary = json.loads(stdout)
    assert code == 0 and (summary["batch_id"], summary["done"], summary["executor"]) == ("cli", 2, "local")
    code, stdout, _ = pse(monkeypatch, capsys, "trace", "list", "--runs-dir", str(tmp_path / "runs"))
    assert code == 0 and stdout.count("PASSED") == 2
    code, _, stderr = pse(
        monkeypatch, capsys, "batch", "code-delivery", "--inputs", str(jsonl), "--address", "auto"
    )
    assert code == 2 and "--address is for --executor ray" in stderr


# ---- Ray --------------------------------------------------------------------------------------------------


@pytest.fixture
def ray_cluster() -> object:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


def test_ray_batch_survives_a_killed_worker(tmp_path: Path, ray_cluster: object) -> None:
    """20 runs on two workers with a simulated model latency; one worker process is killed for real in
    the middle. Ray restarts it and retries its items; each retry waits for the dead holder's lease,
    then resumes that run from its trace. The store ends with exactly 20 finished runs, one per row."""
    settings = _settings(tmp_path / "runs", scripted_latency_s=0.2)
    executor = RayExecutor(workers=2, per_worker=5)
    plan = _plan(settings, 20, executor, tag="ray-kill", lease_s=3.0)

    async def go() -> object:
        batch = asyncio.create_task(run_batch(plan))
        deadline = time.monotonic() + 180
        while not _started(tmp_path / "runs", cycles=1, count=6):
            assert time.monotonic() < deadline and not batch.done(), "the batch's runs never started a cycle"
            await asyncio.sleep(0.05)
        pids = await executor.worker_pids()
        os.kill(pids[0], signal.SIGKILL)
        return await batch

    summary = asyncio.run(go())
    assert (summary.rows, summary.done, summary.outcomes) == (20, 20, {"PASSED": 20})  # type: ignore[attr-defined]
    finished = _finished(settings, "ray-kill")
    assert len(finished) == 20 == len(set(finished))
    store = open_store(settings)
    items = store.items("ray-kill")  # type: ignore[attr-defined]
    assert sorted(i.run_id for i in items) == sorted(finished)  # one run per row, no duplicate
    traces = [load_trace(tmp_path / "runs" / run_id) for run_id in finished]
    retried = [i for i in items if i.attempts > 1]
    assert retried, "the killed worker held items: they were taken over"
    resumed = [t for t in traces if t.resumed]
    assert resumed and all(t.outcome == "PASSED" and len(t.cycles) == 2 for t in traces)
    assert {t.run_id for t in resumed} <= {i.run_id for i in retried}


@needs_postgres
def test_ray_workers_without_the_runs_folder_send_their_runs_back(
    tmp_path: Path,
    ray_cluster: object,
    postgres_url: str,  # noqa: F811  (the fixture)
) -> None:
    settings = _settings(tmp_path / "runs", store_url=postgres_url)
    summary = asyncio.run(run_batch(_plan(settings, 3, RayExecutor(workers=2, per_worker=2, shared=False))))
    assert (summary.done, summary.outcomes) == (3, {"PASSED": 3})
    finished = _finished(settings, summary.batch_id)
    for run_id in finished:
        run_dir = tmp_path / "runs" / run_id
        assert load_trace(run_dir).outcome == "PASSED"
        assert (run_dir / "workspace" / "textstats.py").is_file() or any((run_dir / "workspace").iterdir())
    entries = open_store(settings).entries(RunFilter(tags=(("batch", summary.batch_id),)))
    assert {e.run_id for e in entries} == set(finished)


def test_ray_without_a_shared_store_says_what_to_set(tmp_path: Path, ray_cluster: object) -> None:
    settings = _settings(tmp_path / "runs")
    with pytest.raises(Exception, match="PSE_STORE_URL=postgresql"):
        asyncio.run(run_batch(_plan(settings, 1, RayExecutor(workers=1, shared=False))))


def test_the_model_rate_limit_holds_across_ray_workers(tmp_path: Path, ray_cluster: object) -> None:
    """Eight runs on two workers against one loopback endpoint at PSE_MODEL_RPM=120: the workers' calls
    wait on one named actor, so requests arrive 0.5 s apart, not two at a time (one limiter per worker
    would let each worker start at once)."""
    from standins import ChatStandIn, Reply

    blocked = '<blocked reason_code="MISSING_DATA">the service has no logs to review</blocked>'
    with ChatStandIn("openai") as stand_in:
        stand_in.script(*(Reply(content=blocked, usage=(100, 10)) for _ in range(8)))
        settings = _settings(
            tmp_path / "runs", provider="openai", model="m-test", base_url=stand_in.url, api_key="sk-test-1234567890",
            model_rpm=120,
        )  # fmt: skip
        summary = asyncio.run(run_batch(_plan(settings, 8, RayExecutor(workers=2, per_worker=4))))
        times = sorted(r.at for r in stand_in.requests)
    assert summary.done == 8 and summary.outcomes == {"ESCALATED": 8}, (
        summary
    )  # BLOCKED at once: a person must act
    assert len(times) == 8
    # Admissions are 0.5 s apart; arrivals carry the HTTP hop's jitter (tenths of a second on a loaded
    # machine), so: eight requests spread over 3.5 s, never three in one second. One limiter per worker
    # would let both workers send at once: four a second, the batch over in about 1.5 s.
    assert times[-1] - times[0] >= 3.0, times
    assert max(sum(1 for t in times if start <= t < start + 1.0) for start in times) <= 3, times
    waited = [load_trace(tmp_path / "runs" / r["run_id"]).rate_limit for r in summary.runs]
    assert sum(1 for w in waited if w is not None and w.waited_s > 0) >= 6  # most runs had to wait their turn


def test_a_worker_archive_cannot_write_outside_its_run_folder(tmp_path: Path) -> None:
    """The run folder a Ray worker sends back was written by tools: a member with `..`, an absolute
    name, a symlink or a device is never unpacked; regular files land inside the target only."""
    import io
    import tarfile

    from pse.batch._ray import _pack, _unpack

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in [("../evil.txt", b"x"), ("/tmp/abs-evil.txt", b"x"), ("workspace/ok.py", b"ok")]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("workspace/link")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        archive.addfile(link)
        device = tarfile.TarInfo("workspace/dev")
        device.type = tarfile.CHRTYPE
        archive.addfile(device)
    target = tmp_path / "runs" / "r1"
    _unpack(buffer.getvalue(), target)
    assert sorted(str(p.relative_to(target)) for p in target.rglob("*")) == ["workspace", "workspace/ok.py"]
    assert not (tmp_path / "runs" / "evil.txt").exists() and not Path("/tmp/abs-evil.txt").exists()
    # and the worker side never packs a link a tool made
    run = tmp_path / "run"
    (run / "workspace").mkdir(parents=True)
    (run / "trace.json").write_text("{}")
    (run / "workspace" / "secret").symlink_to("/etc/passwd")
    with tarfile.open(fileobj=io.BytesIO(_pack(run)), mode="r:gz") as packed:
        assert sorted(packed.getnames()) == ["trace.json", "workspace"]
