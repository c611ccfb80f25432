"""One run-id rule (`pse.engine.is_run_id`), used by the history, the dashboard, `pse resume` and the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from pse.config import Settings
from pse.engine import check_run_id, is_run_id, new_run_id
from pse.exceptions import UserError
from pse.history import run_dir_of
from pse.runner import prepare_resume

MALFORMED = ["", ".", "..", "../etc", "a/b", ".hidden", "-dash", "run\n", "run id", "rün", "x" * 202]


def test_new_run_ids_follow_the_rule() -> None:
    for task in ("code-delivery", "incident-review", "a", "x" * 40):
        assert is_run_id(new_run_id(task))


@pytest.mark.parametrize("text", MALFORMED)
def test_malformed_ids_are_refused(text: str) -> None:
    assert not is_run_id(text)
    with pytest.raises(UserError, match="is not a run id; `pse trace list` shows the runs"):
        check_run_id(text)


def test_the_longest_id_and_every_allowed_character_pass() -> None:
    assert check_run_id("A" + "x" * 200) == "A" + "x" * 200
    assert is_run_id("20260101-000000-my_task.v2-abc123")


@pytest.mark.parametrize("text", ["run\n", "../runs", ".hidden"])
def test_history_and_resume_use_the_rule(tmp_path: Path, text: str) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "trace.json").write_text("{}")
    with pytest.raises(UserError, match="is not a run id"):
        run_dir_of(tmp_path, text)
    with pytest.raises(UserError, match="is not a run id"):
        prepare_resume(text, Settings(runs_dir=tmp_path))


def test_the_dashboard_uses_the_rule(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from pse.web import create_app

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "trace.json").write_text("{}")
    with TestClient(create_app(Settings(runs_dir=tmp_path)), base_url="http://127.0.0.1:8080") as client:
        response = client.get("/api/runs/run%0A")  # a trailing newline passed the old `$` pattern
        assert (response.status_code, response.json()["detail"]) == (400, "'run\\n' is not a run id")
