"""Configuration mistakes get the fix, not only the fault: a did-you-mean for every key, table and value
of task.toml, rules.toml and registry.toml and for required checks, ranges stated, a TOML error said
once with its line and column, an unregistered folder named with the line to add, `pse validate`
warning of a task that cannot run offline, plain words for inputs a task does not take, and reading
commands that create nothing. One test per message, asserting the suggestion or the range."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_support import pse
from pse.exceptions import ConfigError, TaskNotFoundError, UserError
from pse.tasks import Problem, TaskRegistry, load_rules, scaffold_task, validate


@pytest.fixture
def tasks_dir(tmp_path: Path) -> Path:
    root = tmp_path / "tasks"
    scaffold_task("notes", root)
    return root


def _append(path: Path, text: str) -> None:
    with path.open("a") as handle:
        handle.write(text)


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def _only(problems: list[Problem]) -> tuple[str, str]:
    assert len(problems) == 1, problems
    return problems[0].message, problems[0].fix


_TOP_LEVEL = (
    "the top level takes: description, goal, inputs, seed, expected_outputs, required_checks, checks, "
    "policy, limits, report, verification, cassette, mcp, sandbox, repository, execution"
)
_LIMITS = (
    "[limits] takes: max_partial_retries, max_fail_retries, max_criterion_failures, turns_per_cycle, "
    "run_timeout_s, token_budget, cost_budget, step_buffer_tokens, max_step_retries, max_steps, "
    "max_parallel_steps"
)


# --- task.toml ------------------------------------------------------------------------------------


def test_an_unknown_key_names_the_key_it_meant(tasks_dir: Path) -> None:
    _replace(tasks_dir / "notes" / "task.toml", "expected_outputs =", "expected_output =")
    assert _only(validate([tasks_dir])) == (
        "unknown key 'expected_output'",
        f"did you mean 'expected_outputs'? ({_TOP_LEVEL})",
    )


def test_an_unknown_key_of_a_table_names_the_key_of_that_table(tasks_dir: Path) -> None:
    _append(tasks_dir / "notes" / "task.toml", "\n[limits]\nmax_partial_retry = 1\n")
    assert _only(validate([tasks_dir])) == (
        "unknown key 'limits.max_partial_retry'",
        f"did you mean 'max_partial_retries'? ({_LIMITS})",
    )


def test_an_unknown_table_names_the_table_it_meant(tasks_dir: Path) -> None:
    _append(tasks_dir / "notes" / "task.toml", "\n[verifcation]\nindependent_tests = true\n")
    assert _only(validate([tasks_dir])) == (
        "unknown table [verifcation]",
        f"did you mean [verification]? ({_TOP_LEVEL})",
    )


def test_a_key_nothing_resembles_lists_what_the_table_takes(tasks_dir: Path) -> None:
    _append(tasks_dir / "notes" / "task.toml", "\n[limits]\ncolour = 1\n")
    assert _only(validate([tasks_dir])) == (
        "unknown key 'limits.colour'",
        f"remove it or fix its spelling; {_LIMITS}",
    )


def test_a_value_outside_its_choices_names_the_choice_it_meant(tasks_dir: Path) -> None:
    toml = tasks_dir / "notes" / "task.toml"
    _replace(toml, 'cassette = "cassette.json"\n', 'cassette = "cassette.json"\nexecution = "step"\n')
    assert _only(validate([tasks_dir])) == (
        "execution: 'step' is not one of task, steps",
        "did you mean 'steps'? (use one of: task, steps)",
    )


@pytest.mark.parametrize(
    ("setting", "message", "fix"),
    [
        (
            "turns_per_cycle = 1",
            "limits.turns_per_cycle: 1 is out of range (it must be at least 3)",
            "set limits.turns_per_cycle to 3 or more",
        ),
        (
            "run_timeout_s = 0",
            "limits.run_timeout_s: 0 is out of range (it must be more than 0)",
            "set limits.run_timeout_s to more than 0",
        ),
        (
            "max_fail_retries = -2",
            "limits.max_fail_retries: -2 is out of range (it must be at least 0)",
            "set limits.max_fail_retries to 0 or more",
        ),
    ],
)
def test_a_number_out_of_range_states_the_range(
    tasks_dir: Path, setting: str, message: str, fix: str
) -> None:
    _append(tasks_dir / "notes" / "task.toml", f"\n[limits]\n{setting}\n")
    assert _only(validate([tasks_dir])) == (message, fix)


def test_a_misspelt_required_check_names_the_declared_one(tasks_dir: Path) -> None:
    _replace(tasks_dir / "notes" / "task.toml", 'required_checks = ["result"]', 'required_checks = ["reslt"]')
    assert _only(validate([tasks_dir])) == (
        "required check 'reslt' is neither built-in (pytest, ruff) nor declared (declared: result)",
        "did you mean 'result'? Or declare it: "
        '[checks] reslt = "{python} {task_dir}/checks/reslt.py", or remove it',
    )


def test_a_misspelt_builtin_check_is_named_too(tasks_dir: Path) -> None:
    _replace(
        tasks_dir / "notes" / "task.toml", 'required_checks = ["result"]', 'required_checks = ["pytset"]'
    )
    _, fix = _only(validate([tasks_dir]))
    assert fix.startswith("did you mean 'pytest'? Or declare it:")


def test_an_unknown_key_of_an_input_names_its_key(tasks_dir: Path) -> None:
    _append(tasks_dir / "notes" / "task.toml", '\n[inputs.topic]\ndescripton = "what the notes are on"\n')
    problems = validate([tasks_dir])
    assert [(p.message, p.fix) for p in problems] == [
        ("inputs.topic.description: required, and not given", "add inputs.topic.description"),
        (
            "unknown key 'inputs.topic.descripton'",
            "did you mean 'description'? ([inputs.topic] takes: description, default, required)",
        ),
    ]


# --- TOML syntax ----------------------------------------------------------------------------------


def test_broken_toml_is_one_problem_with_its_line_column_and_what_is_wrong(tasks_dir: Path) -> None:
    _append(tasks_dir / "notes" / "task.toml", 'goal = "x\n')
    toml = tasks_dir / "notes" / "task.toml"
    line = len(toml.read_text().splitlines())
    [problem] = validate([tasks_dir])
    assert problem.file == str(toml)
    assert problem.message == (
        f"not valid TOML at line {line}, column 10: the line ends inside a string: its closing quote is missing"
    )
    assert problem.fix == f'fix line {line}: goal = "x'


def test_broken_toml_names_its_file_once_on_the_command_line(
    tasks_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    toml = tasks_dir / "notes" / "task.toml"
    _append(toml, "[limits\n")
    code, _, err = pse(monkeypatch, capsys, "run", "notes", "--tasks-dir", str(tasks_dir))
    flat = " ".join(err.split())
    assert code == 2
    assert flat.count(str(toml)) == 1 and flat.count("fix") == 2  # "fix line N" once, and the closing advice
    assert "not valid TOML at line" in flat and "a table header is not closed with ']'" in flat


# --- rules.toml -----------------------------------------------------------------------------------

_RULES = """
[sources.m]
path = "data/m.csv"
timestamp = "ts"

[[rules]]
id = "hot"
kind = "threshold"
source = "m"
column = "v"
op = ">"
value = 5
"""


def _rules(tasks_dir: Path, text: str) -> tuple[str, str]:
    (tasks_dir / "notes" / "data").mkdir(exist_ok=True)
    (tasks_dir / "notes" / "data" / "m.csv").write_text("ts,v\n2026-01-01T00:00:00+00:00,1\n")
    (tasks_dir / "notes" / "rules.toml").write_text(text)
    return _only(validate([tasks_dir]))


@pytest.mark.parametrize(
    ("old", "new", "message", "fix"),
    [
        (
            'kind = "threshold"',
            'kind = "treshold"',
            "rules[1 'hot']: kind 'treshold' is not one of missing_fields, time_gaps, count_match, "
            "event_alignment, threshold, outliers, breakdown",
            "did you mean 'threshold'? (use one of: missing_fields, time_gaps, count_match, event_alignment, "
            "threshold, outliers, breakdown)",
        ),
        (
            'op = ">"',
            'op = "=>"',
            "rules[1 'hot'].op: '=>' is not one of >, >=, <, <=, ==, !=",
            "did you mean '>='? (use one of: >, >=, <, <=, ==, !=)",
        ),
        (
            "value = 5",
            "value = 5\nmin_consecutiv = 2",
            "unknown key 'rules[1 'hot'].min_consecutiv'",
            "did you mean 'min_consecutive'? (rules[1 'hot'] takes: id, title, source, kind, column, op, value, "
            "value_column, min_consecutive)",
        ),
        (
            'timestamp = "ts"',
            'timestamp = "ts"\nformat = "csvv"',
            "sources.m.format: 'csvv' is not one of csv, json, jsonl",
            "did you mean 'csv'? (use one of: csv, json, jsonl)",
        ),
    ],
)
def test_rules_toml_suggests_keys_kinds_and_values(
    tasks_dir: Path, old: str, new: str, message: str, fix: str
) -> None:
    assert old in _RULES
    assert _rules(tasks_dir, _RULES.replace(old, new)) == (message, fix)


def test_rules_toml_without_sources_names_the_table_it_meant(tasks_dir: Path) -> None:
    (tasks_dir / "notes" / "rules.toml").write_text(_RULES.replace("[sources.m]", "[sourcs.m]"))
    problems = validate([tasks_dir])
    assert [(p.message, p.fix) for p in problems] == [
        ("sources: required, and not given", "add sources"),
        ("unknown table [sourcs]", "did you mean [sources]? (the top level takes: sources, rules)"),
    ]


def test_a_rule_share_out_of_range_states_both_bounds(tasks_dir: Path) -> None:
    text = (
        _RULES
        + '\n[[rules]]\nid = "who"\nkind = "breakdown"\nsource = "m"\ncolumn = "v"\ndominant_share = 2\n'
    )
    assert _rules(tasks_dir, text) == (
        "rules[2 'who'].dominant_share: 2 is out of range (it must be more than 0 and at most 1)",
        "set rules[2 'who'].dominant_share to a number more than 0 and at most 1",
    )


def test_summarize_says_the_same_of_its_rules(tasks_dir: Path) -> None:
    path = tasks_dir / "notes" / "rules.toml"
    path.write_text(_RULES.replace('op = ">"', 'op = "=>"'))
    with pytest.raises(ConfigError) as caught:
        load_rules(path)
    assert str(caught.value) == (
        f"{path}: invalid rules file:\n  rules[1 'hot'].op: '=>' is not one of >, >=, <, <=, ==, !=\n"
        "    fix: did you mean '>='? (use one of: >, >=, <, <=, ==, !=)\nSee docs/tasks.md for the format."
    )


# --- registry.toml and task folders ---------------------------------------------------------------


def test_registry_toml_suggests_its_key(tasks_dir: Path) -> None:
    (tasks_dir / "registry.toml").write_text('[tasks.notes]\npth = "notes"\n')
    assert _only(validate([tasks_dir])) == (
        "unknown key 'tasks.notes.pth'",
        "did you mean 'path'? ([tasks.notes] takes: path)",
    )


def test_registry_toml_suggests_its_table(tasks_dir: Path) -> None:
    (tasks_dir / "registry.toml").write_text('[task.notes]\npath = "notes"\n')
    problems = validate([tasks_dir])
    assert (problems[0].message, problems[0].fix) == (
        "unknown table [task]",
        "did you mean [tasks]? (the top level takes: tasks)",
    )


def test_an_unregistered_folder_is_named_with_the_registry_line_to_add(tasks_dir: Path) -> None:
    other = tasks_dir / "other"
    other.mkdir()
    for name in ("planner.md", "specialist.md", "evaluator.md", "task.toml"):
        (other / name).write_text((tasks_dir / "notes" / name).read_text())
    registry = TaskRegistry.discover(tasks_dir)
    with pytest.raises(TaskNotFoundError) as caught:
        registry.get("other")
    assert str(caught.value) == (
        f"{other} looks like a task named 'other', but {tasks_dir / 'registry.toml'} has no entry for it; "
        "add the line [tasks.other] to register it"
    )


def test_the_unregistered_folder_message_keeps_its_brackets_on_the_command_line(
    tasks_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tasks_dir / "other").mkdir()
    (tasks_dir / "other" / "planner.md").write_text("x")
    code, _, err = pse(monkeypatch, capsys, "run", "other", "--tasks-dir", str(tasks_dir))
    assert code == 2 and "add the line [tasks.other] to register it" in " ".join(err.split())
    code, _, err = pse(monkeypatch, capsys, "validate", "--tasks-dir", str(tasks_dir))
    assert code == 2
    assert f'fix: add [tasks.other] with path = "other" to {tasks_dir / "registry.toml"}' in " ".join(
        err.split()
    )


def test_a_misspelt_task_name_is_suggested_by_the_python_api_too(tasks_dir: Path) -> None:
    with pytest.raises(
        TaskNotFoundError, match=r"^no task named 'note'; did you mean 'notes'\? \(available: "
    ):
        TaskRegistry.discover(tasks_dir).get("note")


# --- pse validate: warnings -----------------------------------------------------------------------


def test_validate_warns_of_a_task_that_cannot_run_offline(
    tasks_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("PSE_PROVIDER", "PSE_API_KEY", "OPENAI_API_KEY", "PSE_CASSETTE"):
        monkeypatch.delenv(name, raising=False)
    _replace(tasks_dir / "notes" / "task.toml", 'cassette = "cassette.json"\n', "")
    (tasks_dir / "notes" / "cassette.json").unlink()
    code, out, err = pse(monkeypatch, capsys, "validate", "notes", "--tasks-dir", str(tasks_dir))
    assert code == 0
    assert out.startswith("ok: notes valid (1 warning above)")
    assert " ".join(err.split()) == (
        f"warning: {tasks_dir / 'notes' / 'task.toml'}: task 'notes' cannot run offline: it has no cassette, "
        f"and no model is configured fix: record one with a real model (`pse run notes --record "
        f"{tasks_dir / 'notes' / 'cassette.json'}`), or configure a model (PSE_PROVIDER, PSE_MODEL, PSE_BASE_URL)"
    )
    monkeypatch.setenv("PSE_PROVIDER", "ollama")  # a model configured: it can run, online
    code, out, err = pse(monkeypatch, capsys, "validate", "notes", "--tasks-dir", str(tasks_dir))
    assert (code, err) == (0, "") and out.startswith("ok: notes valid\n")


def test_validate_warns_of_a_cassette_that_never_writes_an_expected_output(
    tasks_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("PSE_PROVIDER", "PSE_API_KEY", "OPENAI_API_KEY", "PSE_CASSETTE"):
        monkeypatch.delenv(name, raising=False)
    toml = tasks_dir / "notes" / "task.toml"
    _replace(toml, 'expected_outputs = ["result.md"]', 'expected_outputs = ["result.md", "summary.md"]')
    code, out, err = pse(monkeypatch, capsys, "validate", "notes", "--tasks-dir", str(tasks_dir))
    cassette = tasks_dir / "notes" / "cassette.json"
    assert code == 0 and out.startswith("ok: notes valid (1 warning above)")
    assert " ".join(err.split()) == (
        f"warning: {cassette}: the cassette never writes the expected output summary.md: a replay fails the "
        "gate outputs_exist in every cycle fix: record the cassette again, or add a Specialist turn that "
        'writes summary.md (<invoke name="write_file">); or fix expected_outputs in task.toml'
    )


def test_a_cassette_that_writes_every_output_natively_is_no_warning(tasks_dir: Path) -> None:
    from pse.tasks import cassette_writes

    cassette = tasks_dir / "notes" / "cassette.json"
    cassette.write_text(
        json.dumps(
            {
                "version": 1,
                "turns": [
                    {"role": "Specialist", "content": "", "tool_calls": [
                        {"name": "write_file", "arguments": {"path": "./result.md", "content": "# notes"}}
                    ]},
                    {"role": "Specialist", "content": '<tool_calls><invoke name="write_file"><parameter '
                     'name="path"><![CDATA[b.md]]></parameter><parameter name="content">x</parameter>'
                     "</invoke></tool_calls>"},
                ],
            }
        )
    )  # fmt: skip
    assert cassette_writes(cassette) == {"result.md", "b.md"}


# --- inputs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("foo", "error: task 'notes' takes no inputs; run it without --input foo"),
        ("foo=1", "error: task 'notes' takes no inputs, and was given foo; run it without inputs (--input)"),
    ],
)
def test_an_input_given_to_a_task_without_inputs_is_said_plainly(
    given: str,
    message: str,
    tasks_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = pse(
        monkeypatch, capsys, "run", "notes", "--input", given, "--tasks-dir", str(tasks_dir), "--runs-dir",
        str(tasks_dir.parent / "runs"),
    )  # fmt: skip
    assert (code, " ".join(err.split())) == (2, message)
    assert not (tasks_dir.parent / "runs").exists()


def test_a_misspelt_input_names_the_input_it_meant() -> None:
    task = TaskRegistry.discover().get("incident-review")
    with pytest.raises(UserError) as caught:
        task.resolve_inputs({"servce": "x"})
    assert str(caught.value) == (
        "task 'incident-review' has no input servce (did you mean 'service'?); its inputs are: service"
    )


def test_an_input_that_is_no_pair_lists_what_the_task_takes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = pse(monkeypatch, capsys, "run", "incident-review", "--input", "service")
    assert code == 2
    assert " ".join(err.split()).startswith(
        "error: --input service is not KEY=VALUE; task 'incident-review' takes service ("
    )


# --- reading commands create nothing --------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["trace", "list"], "no runs folder at {runs} (nothing created)"),
        (["stats"], "no runs folder at {runs} (nothing created)"),
        (["store", "info"], "store: sqlite:///{runs}/runs.sqlite3"),
        (["clean"], "removed 0 run(s) (no runs folder at {runs})"),
        (["trace", "show", "last"], "no runs in {runs} yet, so no `last` one"),
    ],
)
def test_a_reading_command_creates_no_runs_folder_and_no_store(
    args: list[str],
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    runs = tmp_path / "nowhere"
    _, out, err = pse(monkeypatch, capsys, *args, "--runs-dir", str(runs))
    assert said.format(runs=runs) in " ".join((out + err).split())
    assert not runs.exists()


def test_a_runs_folder_without_a_store_is_read_without_making_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    code, _, _ = pse(monkeypatch, capsys, "run", "code-delivery", "--runs-dir", str(runs), "--json")
    assert code == 0
    from pse.store import close_stores

    close_stores()
    for name in ("runs.sqlite3", "runs.sqlite3-wal", "runs.sqlite3-shm"):
        (runs / name).unlink(missing_ok=True)
    code, out, _ = pse(monkeypatch, capsys, "trace", "list", "--runs-dir", str(runs))
    assert code == 0 and "code-delivery" in out and "PASSED" in out
    code, out, _ = pse(monkeypatch, capsys, "stats", "--runs-dir", str(runs), "--json")
    assert code == 0 and json.loads(out)["runs"] == 1
    assert sorted(p.name for p in runs.iterdir() if p.is_file()) == []
