"""The docs match the code and each other: the configuration table, `.env.example`, the variables, the links."""

from __future__ import annotations

import re
from pathlib import Path

from pse.config import env_example, env_variables, settings_table

ROOT = Path(__file__).resolve().parents[1]
CONFIGURATION = ROOT / "docs" / "configuration.md"
START, END = "<!-- settings-table:start -->", "<!-- settings-table:end -->"


def _generated_table(path: Path) -> str:
    """The text between the one pair of settings-table markers of `path`."""
    text = path.read_text(encoding="utf-8")
    assert text.count(START) == 1 and text.count(END) == 1, f"{path.name}: one pair of settings-table markers"
    return text.split(START)[1].split(END)[0].strip("\n")


def test_configuration_settings_table_matches_the_settings_model() -> None:
    assert _generated_table(CONFIGURATION) == settings_table(), (
        "docs/configuration.md's settings table is stale: run `make docs`"
    )


def test_env_example_lists_every_variable() -> None:
    text = (ROOT / ".env.example").read_text(encoding="utf-8")
    assert text == env_example(), ".env.example is stale: run `make docs`"
    for name in env_variables():
        assert f"# {name}=" in text or name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "PSE_KB_HOST")


# The variable names are a public contract: scripts, .env files and deployments use them.
PUBLIC_VARIABLES = """
PSE_PROVIDER PSE_MODEL PSE_BASE_URL OPENAI_BASE_URL PSE_API_KEY OPENAI_API_KEY
PSE_PLANNER_PROVIDER PSE_PLANNER_MODEL PSE_PLANNER_BASE_URL PSE_PLANNER_API_KEY
PSE_SPECIALIST_PROVIDER PSE_SPECIALIST_MODEL PSE_SPECIALIST_BASE_URL PSE_SPECIALIST_API_KEY
PSE_EVALUATOR_PROVIDER PSE_EVALUATOR_MODEL PSE_EVALUATOR_BASE_URL PSE_EVALUATOR_API_KEY
PSE_CASSETTE PSE_RECORD PSE_REPLAY_STRICT PSE_MODEL_TIMEOUT_S PSE_MODEL_MAX_RETRIES PSE_MODEL_BACKOFF_S
PSE_MODEL_MAX_TOKENS PSE_MODEL_TEMPERATURE PSE_PRICES PSE_TOOL_TIMEOUT_S PSE_SANDBOX PSE_SANDBOX_UID
PSE_TOOL_OUTPUT_LIMIT PSE_TOOL_MEMORY_MB PSE_TOOL_CPU_S PSE_TOOL_FILE_SIZE_MB PSE_TOOL_MAX_PROCESSES
PSE_TOOL_CALLS_PER_CYCLE PSE_MAX_INVOKES_PER_MESSAGE PSE_MAX_PARAMETER_BYTES PSE_MAX_PARTIAL_RETRIES
PSE_MAX_FAIL_RETRIES PSE_TURNS_PER_CYCLE PSE_RUN_TIMEOUT_S PSE_TOKEN_BUDGET PSE_COST_BUDGET
PSE_STEP_BUFFER_TOKENS PSE_CONTEXT_MODE PSE_TRACE_RETENTION_DAYS PSE_RUNS_DIR PSE_TASKS_DIR
PSE_KB_BACKEND PSE_KB_MODEL PSE_KB_BASE_URL PSE_KB_HOST PSE_KB_API_KEY PSE_KB_HYBRID_WEIGHT
PSE_KB_INJECT_TOP_K PSE_KB_CHUNK_CHARS PSE_KB_CHUNK_OVERLAP PSE_KB_TIMEOUT_S PSE_LOG_LEVEL PSE_WEB_TOKEN
""".split()  # noqa: SIM905 - one line per table section reads better than 61


def test_the_variables_are_the_public_ones_in_the_table_order() -> None:
    """New variables may be added at the end of a section; none may be renamed or dropped."""
    names = env_variables()
    assert [n for n in names if n in PUBLIC_VARIABLES] == PUBLIC_VARIABLES
    table = _generated_table(CONFIGURATION)
    for name in names:
        assert f"`{name}`" in table


def test_readme_states_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make demo" in readme and "make test" in readme


def _anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown file (code blocks skipped)."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    for heading in re.findall(r"^#{1,6}\s+(.+)$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchors.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def test_every_link_of_the_readme_and_the_docs_resolves() -> None:
    """A relative link names a file of the repository, and its #anchor a heading of that file."""
    broken = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in _anchors(linked)):
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []
