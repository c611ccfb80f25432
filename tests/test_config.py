"""Settings: the environment and `.env`, per-role models, overrides that refuse mistakes, the Python API."""

from __future__ import annotations

from pathlib import Path

import pytest

from pse.config import RoleSettings, Settings, env_variables, load_settings, with_overrides
from pse.exceptions import ConfigError, UnknownVariableWarning
from pse.roles import Role


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


def test_public_dump_hides_secrets_and_keeps_the_flat_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PSE_API_KEY", "sk-secret")
    monkeypatch.setenv("PSE_EVALUATOR_API_KEY", "sk-other")
    settings = load_settings()
    dumped = settings.public_dump()
    assert "sk-secret" not in str(dumped) and "sk-other" not in str(dumped)
    assert (dumped["api_key"], dumped["evaluator_api_key"], dumped["planner_api_key"]) == ("***", "***", None)
    # The trace's `settings` keeps one key per variable, as before the role models were nested.
    assert [f"PSE_{name.upper()}" for name in dumped] == [n for n in env_variables() if n.startswith("PSE_") and n != "PSE_KB_HOST"]  # fmt: skip
    assert settings.secrets() == [("PSE_API_KEY", "sk-secret"), ("PSE_EVALUATOR_API_KEY", "sk-other")]


def test_with_overrides_validates_and_keeps_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PSE_MODEL", "from-env")
    base = load_settings()
    changed = with_overrides(base, max_partial_retries=1)
    assert (changed.max_partial_retries, changed.model) == (1, "from-env")
    assert with_overrides(base) is base
    with pytest.raises(ConfigError, match=r"(?s)limit override of task 'x'.*PSE_TURNS_PER_CYCLE"):
        with_overrides(base, "limit override of task 'x'", turns_per_cycle=1)


def test_per_role_settings_are_typed_models_read_from_the_flat_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    Path(".env").write_text("PSE_PLANNER_MODEL=from-dotenv\nPSE_SPECIALIST_BASE_URL=http://127.0.0.1:2/v1\n")
    monkeypatch.setenv("PSE_PLANNER_MODEL", "from-env")  # the environment wins over .env
    monkeypatch.setenv("PSE_EVALUATOR_API_KEY", "sk-eval")
    settings = load_settings()
    assert settings.role(Role.PLANNER) == RoleSettings(model="from-env")
    assert settings.specialist == RoleSettings(base_url="http://127.0.0.1:2/v1")
    evaluator = settings.role("Evaluator")
    assert evaluator.api_key is not None and evaluator.api_key.get_secret_value() == "sk-eval"
    # Flat Python names stay the way to override one role's setting; the rest of the role is kept.
    changed = with_overrides(settings, planner_provider="ollama")
    assert changed.planner == RoleSettings(provider="ollama", model="from-env")
    assert load_settings(planner_model="kw").planner.model == "kw"  # a keyword wins over the environment
    assert load_settings(planner=RoleSettings(provider="ollama")).model_spec("Planner").provider == "ollama"
    with pytest.raises(ConfigError, match="unknown role 'ToolAgent'"):
        settings.role("ToolAgent")


def test_every_role_field_is_a_variable_of_every_role() -> None:
    """A per-role setting is one field of RoleSettings: its variables follow from it."""
    assert set(Role) == {Role(name.capitalize()) for name, field in Settings.model_fields.items() if field.annotation is RoleSettings}  # fmt: skip
    names = env_variables()
    for role in Role:
        for field in RoleSettings.model_fields:
            assert f"PSE_{role.upper()}_{field.upper()}" in names
    assert len(names) == len(set(names))


def test_an_invalid_role_variable_names_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PSE_SPECIALIST_PROVIDER", "gpt")
    with pytest.raises(ConfigError, match="PSE_SPECIALIST_PROVIDER: Input should be 'openai'"):
        load_settings()


@pytest.mark.parametrize(
    "make",
    [
        lambda: load_settings(max_partial_retry=1),
        lambda: with_overrides(load_settings(), max_partial_retry=1),
        lambda: Settings(max_partial_retry=1),
        lambda: Settings.model_validate({"max_partial_retry": 1}),
    ],
    ids=["load_settings", "with_overrides", "Settings", "model_validate"],
)
def test_an_unknown_setting_is_refused_naming_the_closest(make: object) -> None:
    with pytest.raises(ConfigError, match=r"unknown setting 'max_partial_retry' \(did you mean 'max_partial_retries'\?\)"):  # fmt: skip
        make()  # type: ignore[operator]


def test_unknown_settings_are_all_named_flat_role_names_too() -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(plannr_model="x", zzz_nothing_alike=1)
    assert "'plannr_model' (did you mean 'planner_model'?), 'zzz_nothing_alike';" in str(info.value)


def test_an_unknown_variable_warns_naming_the_closest_and_changes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PSE_PROVDER", "openai")
    monkeypatch.setenv("PSE_PLANNER", "gpt-4o")  # no JSON to decode: a stray variable like any other
    Path(".env").write_text("PSE_KB_HSOT=http://127.0.0.1:3\nOTHER_TOOL_SETTING=1\n")
    with pytest.warns(UnknownVariableWarning) as caught:
        settings = load_settings()
    assert sorted(str(w.message) for w in caught) == [
        "PSE_KB_HSOT in .env is no PSE setting and is ignored; did you mean PSE_KB_HOST?",
        "PSE_PLANNER in the environment is no PSE setting and is ignored; did you mean PSE_PLANNER_MODEL?",
        "PSE_PROVDER in the environment is no PSE setting and is ignored; did you mean PSE_PROVIDER?",
    ]
    assert (settings.provider, settings.kb_base_url, settings.planner) == (None, None, RoleSettings())


def test_a_misspelt_limit_stops_naming_the_setting_that_does_what_it_meant(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 47, item 5: `PSE_MAX_CYCLE=3` in .env only warned "did you mean PSE_MAX_STEPS?" (the steps of a
    plan) and the run went on with no limit. No setting counts cycles: the two that bound them are named."""
    Path(".env").write_text("PSE_MAX_CYCLE=3\n")
    monkeypatch.setenv("PSE_MAX_PARTIAL_RETRY", "1")
    with pytest.raises(ConfigError) as stopped:
        load_settings()
    assert str(stopped.value).splitlines() == [
        "PSE_MAX_PARTIAL_RETRY in the environment is no PSE setting, so the limit it sets would not hold; "
        "fix: did you mean PSE_MAX_PARTIAL_RETRIES? rename it in the environment",
        "PSE_MAX_CYCLE in .env is no PSE setting, so the limit it sets would not hold; no setting counts cycles: "
        "a run has its first cycle, up to PSE_MAX_PARTIAL_RETRIES revisions of each plan (default 3) and up to "
        "PSE_MAX_FAIL_RETRIES re-plans (default 2), at most (1 + 3) × (1 + 2) = 12 cycles by default; fix: for "
        "at most 3 cycle(s), set PSE_MAX_PARTIAL_RETRIES=2 and PSE_MAX_FAIL_RETRIES=0 in its place",
    ]


def test_python_api_runs_a_task(tmp_path: Path) -> None:
    import pse

    summary = pse.run("code-delivery", runs_dir=tmp_path, max_partial_retries=0, max_fail_retries=0)
    assert (summary.outcome, summary.cycles) == ("ESCALATED", 1)  # the first PARTIAL may not be revised
    assert summary.tokens.total == summary.tokens.prompt + summary.tokens.completion > 0
    assert (summary.cost.amount, summary.cost.currency) == (0.0, "USD")
    assert pse.__version__
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        pse.nothing  # noqa: B018


@pytest.mark.parametrize("given", [False, True], ids=["from the environment", "with settings"])
def test_python_api_refuses_a_mistyped_setting_before_it_starts(tmp_path: Path, given: bool) -> None:
    import pse

    settings = {"settings": Settings(runs_dir=tmp_path)} if given else {"runs_dir": tmp_path}
    with pytest.raises(ConfigError, match="did you mean 'max_partial_retries'"):
        pse.run("code-delivery", max_partial_retry=1, **settings)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_a_per_role_key_from_dotenv_is_redacted_from_tool_output(tmp_path: Path) -> None:
    from pse.toolagent import Policy, ToolExecutor

    secret = "sk-evaluator-only-in-dotenv-0123456789"
    # In .env, not in the environment: only the settings know this secret.
    Path(".env").write_text(f"PSE_EVALUATOR_API_KEY={secret}\n")
    settings = load_settings(sandbox="fallback")
    executor = ToolExecutor(tmp_path, settings, Policy.default(settings))
    assert executor.redactor.text(f"leaked: {secret}") == "leaked: [redacted:PSE_EVALUATOR_API_KEY]"


def test_a_small_model_named_by_the_readme_variables_alone_names_its_temperature(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A request that names no temperature gets its server's default (0.8 on llama.cpp's, 1 on OpenAI's):
    the held-out runs of issue 44 sampled at 0.8 without knowing it. A small model's requests now name
    it; what the user sets wins."""
    for name, value in {"PSE_PROVIDER": "openai", "PSE_BASE_URL": "http://127.0.0.1:1/v1"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PSE_MODEL", "qwen2.5-coder-1.5b")
    small = load_settings()
    assert (small.model_temperature, small.model_max_tokens, small.format_retries) == (0.8, 4096, 2)
    assert small.max_criterion_failures == 3  # the first cycle and its two revisions
    assert load_settings(model_temperature=0).model_temperature == 0  # what the user sets wins, 0 too
    monkeypatch.setenv("PSE_MODEL_TEMPERATURE", "0.3")
    assert load_settings().model_temperature == 0.3
    monkeypatch.delenv("PSE_MODEL_TEMPERATURE")
    monkeypatch.setenv("PSE_MODEL", "gpt-4o-mini")  # no size in its name: the provider's own
    assert (load_settings().model_temperature, load_settings().model_max_tokens) == (None, None)
