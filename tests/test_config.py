from __future__ import annotations

from pathlib import Path

import pytest

from pse.config import load_settings
from pse.exceptions import ConfigError


def test_default_provider_is_scripted_and_says_so() -> None:
    spec = load_settings().model_spec("Planner")
    assert (spec.provider, spec.model, spec.provider_was_defaulted) == ("scripted", "scripted", True)


def test_api_key_alone_selects_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    spec = load_settings().model_spec("Specialist")
    assert spec.provider == "openai"
    assert spec.api_key is not None and spec.api_key.get_secret_value() == "sk-test"


def test_role_overrides_fall_back_to_globals(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PSE_PROVIDER", "openai")
    monkeypatch.setenv("PSE_MODEL", "gpt-x")
    monkeypatch.setenv("PSE_BASE_URL", "http://127.0.0.1:1/v1")
    monkeypatch.setenv("PSE_EVALUATOR_PROVIDER", "ollama")
    monkeypatch.setenv("PSE_EVALUATOR_MODEL", "qwen3:8b")
    settings = load_settings()
    planner, evaluator = settings.model_spec("Planner"), settings.model_spec("Evaluator")
    assert (planner.provider, planner.model, planner.base_url) == ("openai", "gpt-x", "http://127.0.0.1:1/v1")
    assert (evaluator.provider, evaluator.model, evaluator.base_url) == (
        "ollama",
        "qwen3:8b",
        "http://127.0.0.1:1/v1",
    )


def test_bad_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PSE_MAX_PARTIAL_RETRIES", "many")
    with pytest.raises(ConfigError, match="PSE_MAX_PARTIAL_RETRIES"):
        load_settings()


def test_public_dump_hides_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PSE_API_KEY", "sk-secret")
    monkeypatch.setenv("PSE_EVALUATOR_API_KEY", "sk-other")
    dumped = load_settings().public_dump()
    assert "sk-secret" not in str(dumped) and "sk-other" not in str(dumped)
    assert dumped["api_key"] == "***"


def test_with_overrides_validates_and_keeps_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    from pse.config import with_overrides

    monkeypatch.setenv("PSE_MODEL", "from-env")
    base = load_settings()
    changed = with_overrides(base, max_partial_retries=1)
    assert (changed.max_partial_retries, changed.model) == (1, "from-env")
    assert with_overrides(base) is base
    with pytest.raises(ConfigError, match=r"(?s)limit override of task 'x'.*PSE_TURNS_PER_CYCLE"):
        with_overrides(base, "limit override of task 'x'", turns_per_cycle=1)


def test_python_api_runs_a_task(tmp_path: Path) -> None:
    import pse

    summary = pse.run("code-delivery", runs_dir=tmp_path, max_partial_retries=0, max_fail_retries=0)
    assert (summary.outcome, summary.cycles) == ("ESCALATED", 1)  # the first PARTIAL may not be revised
    assert pse.__version__ and "run" in pse.__all__
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        pse.nothing  # noqa: B018
