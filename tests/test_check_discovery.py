"""Each discovery rule of pytest and ruff that files under review could use to steer a check, and the flag
of PSE's that switches it off, pinned one by one.

The manifest already keeps undeclared configuration out of a check's snapshot; these tests put the
steering file *into* the snapshot anyway (a manifest that admits everything), so each one proves the flag,
not the manifest. Rules from pytest's docs ("Configuration", "Writing plugins", "pytest import
mechanisms") and ruff's ("Configuring Ruff: config file discovery", "File selection").
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pse.sandbox import Sandbox, SandboxLimits, bwrap_problem
from pse.tools import (
    EvidenceFile,
    Manifest,
    ToolContext,
    ToolOutcome,
    build_manifest,
    builtin_tools,
    is_test_file,
)
from pse.tools._evidence import EvidenceRules

BWRAP_MISSING = bwrap_problem()
MODES = [
    pytest.param("bwrap", marks=pytest.mark.skipif(BWRAP_MISSING is not None, reason="no bwrap")),
    "fallback",
]
TOOLS = builtin_tools()

CODE = "def add(a, b):\n    return a - b\n"  # wrong: both tests below fail
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\ndef test_more():\n    assert add(2, 2) == 4\n"
FORCE_PASS = (
    "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n"
)


def _everything(root: Path) -> Manifest:
    """A manifest that admits every file, steering ones included (what PSE's manifest never does)."""
    files = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = (Path(folder) / name).relative_to(root).as_posix()
            files.append(EvidenceFile(path, "test" if is_test_file(path) else "input", "task"))
    return Manifest(tuple(sorted(files, key=lambda f: f.path)))


def _check(tool: str, root: Path, files: dict[str, str], mode: str = "fallback") -> ToolOutcome:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    box = Sandbox(root, SandboxLimits(timeout_s=60), mode)  # type: ignore[arg-type]
    ctx = ToolContext(Path(os.path.realpath(root)), box, evidence=lambda: _everything(root))
    spec = TOOLS.get(tool)
    assert spec is not None
    return spec.function(ctx)


def _failed_both(out: ToolOutcome) -> None:
    assert (out.facts["passed"], out.facts["failed"]) == (0, 2), out.output


class TestPytestRules:
    @pytest.mark.parametrize(
        ("name", "text"),
        [
            ("pytest.toml", '[pytest]\naddopts = ["-k", "nothing"]\n'),
            (".pytest.toml", '[pytest]\naddopts = ["-k", "nothing"]\n'),
            ("pytest.ini", "[pytest]\naddopts = -k nothing\n"),
            (".pytest.ini", "[pytest]\naddopts = -k nothing\n"),
            ("pyproject.toml", '[tool.pytest.ini_options]\naddopts = "-k nothing"\n'),
            ("tox.ini", "[pytest]\naddopts = -k nothing\n"),
            ("setup.cfg", "[tool:pytest]\naddopts = -k nothing\n"),
        ],
    )
    def test_an_ini_file_in_the_snapshot_is_not_the_configuration(
        self, tmp_path: Path, name: str, text: str
    ) -> None:
        """Rule: the first ini-file from the arguments upward configures the run. Flag: `-c /dev/null`."""
        _failed_both(_check("run_pytest", tmp_path, {"calc.py": CODE, "test_calc.py": TESTS, name: text}))

    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize("where", ["conftest.py", "sub/conftest.py"])
    def test_a_conftest_in_the_snapshot_is_not_imported(self, tmp_path: Path, mode: str, where: str) -> None:
        """Rule: every conftest.py of the collected folders and their parents is imported. Flag: `--noconftest`
        (and `--confcutdir` at the snapshot, `--rootdir` there)."""
        tests = {
            "calc.py": CODE,
            "test_calc.py": TESTS,
            "sub/test_calc_sub.py": TESTS.replace("test_", "test_sub_"),
        }
        out = _check("run_pytest", tmp_path, {**tests, where: FORCE_PASS}, mode)
        assert (out.facts["passed"], out.facts["failed"]) == (0, 4), out.output

    def test_plugins_installed_or_named_in_the_environment_do_not_load(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Rule: entry-point plugins autoload; `PYTEST_PLUGINS` and `PYTEST_ADDOPTS` add plugins and options.
        Flags: `--disable-plugin-autoload`, and the command's environment is an allow-list."""
        monkeypatch.setenv("PYTEST_ADDOPTS", "-k nothing")
        monkeypatch.setenv("PYTEST_PLUGINS", "forcing")
        out = _check(
            "run_pytest", tmp_path, {"calc.py": CODE, "test_calc.py": TESTS, "forcing.py": FORCE_PASS}
        )
        _failed_both(out)

    def test_a_test_module_cannot_name_plugins(self, tmp_path: Path) -> None:
        """Rule: `pytest_plugins` in a test module loads plugins. PSE's plugin refuses it."""
        files = {
            "calc.py": CODE,
            "test_calc.py": 'pytest_plugins = ["forcing"]\n' + TESTS,
            "forcing.py": FORCE_PASS,
        }
        out = _check("run_pytest", tmp_path, files)
        assert out.facts["passed"] == 0 and "asks for plugins (pytest_plugins)" in out.output

    @pytest.mark.parametrize("folder", ["build", "dist", ".hidden", "node_modules", "venv", "x.egg"])
    def test_a_test_in_a_folder_recursion_skips_still_runs(self, tmp_path: Path, folder: str) -> None:
        """Rule: collection does not recurse into `norecursedirs` (build, dist, dot-folders, …) nor outside
        `testpaths`. Flag: explicit test files."""
        out = _check("run_pytest", tmp_path, {"calc.py": CODE, f"{folder}/test_calc.py": TESTS})
        _failed_both(out)

    def test_a_module_named_like_the_standard_library_does_not_shadow_it(self, tmp_path: Path) -> None:
        """Rule: the test's folder goes first on `sys.path` (prepend import mode). Flags: `--import-mode=append`
        and `python -I`."""
        tests = "import json\n\n\ndef test_json():\n    assert json.dumps([1]) == '[1]'\n"
        out = _check("run_pytest", tmp_path, {"json.py": "dumps = None\n", "test_json_real.py": tests})
        assert (out.facts["passed"], out.facts["failed"]) == (1, 0), out.output

    def test_the_cache_cannot_select_what_runs(self, tmp_path: Path) -> None:
        """Rule: the cache provider's `--lf`/`--ff`/`--sw` read `.pytest_cache`. Flag: `-p no:cacheprovider`."""
        cache = '{"test_calc.py::test_add": true}'
        files = {"calc.py": CODE, "test_calc.py": TESTS, ".pytest_cache/v/cache/lastfailed": cache}
        _failed_both(_check("run_pytest", tmp_path, files))

    def test_bytecode_is_never_evidence(self, tmp_path: Path) -> None:
        """Rule: a `__pycache__/*.pyc` (an unchecked hash-based one needs no source match) is imported instead
        of the source. PSE's manifest never admits bytecode, so the snapshot holds sources only."""
        (tmp_path / "__pycache__").mkdir()
        (tmp_path / "__pycache__" / "calc.cpython-311.pyc").write_bytes(b"\x00" * 16)
        (tmp_path / "calc.pyc").write_bytes(b"\x00" * 16)
        (tmp_path / "calc.py").write_text(CODE)
        manifest = build_manifest(tmp_path, None, EvidenceRules(), lambda area, path: "task")
        assert [f.path for f in manifest.files] == ["calc.py"]


class TestRuffRules:
    LINT = "import os\n\n\ndef add(a, b):\n    return a + b\n"  # F401

    @pytest.mark.parametrize(
        ("name", "text"),
        [
            ("ruff.toml", '[lint]\nignore = ["ALL"]\n'),
            (".ruff.toml", '[lint]\nignore = ["ALL"]\n'),
            ("pyproject.toml", '[tool.ruff.lint]\nignore = ["ALL"]\n'),
            ("sub/ruff.toml", '[lint]\nignore = ["ALL"]\n'),
        ],
    )
    def test_a_configuration_in_the_snapshot_is_not_read(self, tmp_path: Path, name: str, text: str) -> None:
        """Rule: each file's closest ruff.toml/.ruff.toml/pyproject.toml configures it. Flag: `--isolated`
        (or `--config` the task's declared file)."""
        out = _check("run_ruff", tmp_path, {"calc.py": self.LINT, "sub/calc2.py": self.LINT, name: text})
        assert out.facts["findings"] == 2, out.output
        # the record keeps the findings themselves too, for a revise's step_buffer (path:row:col: code …)
        assert [f.split(" ")[0] for f in out.facts["finding_list"]] == ["calc.py:1:8:", "sub/calc2.py:1:8:"]

    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize("name", [".gitignore", ".ignore", ".git/info/exclude"])
    def test_an_ignore_file_does_not_hide_a_file(self, tmp_path: Path, mode: str, name: str) -> None:
        """Rule: discovery honours .gitignore, .ignore and git's exclude file. Flags: explicit files and
        `--no-respect-gitignore`."""
        (tmp_path / ".git").mkdir()
        out = _check("run_ruff", tmp_path, {"calc.py": self.LINT, name: "calc.py\n*.py\n"}, mode)
        assert out.facts["findings"] == 1, out.output

    @pytest.mark.parametrize("folder", ["build", "dist", ".venv", "node_modules", "site-packages"])
    def test_a_file_in_a_default_excluded_folder_is_checked(self, tmp_path: Path, folder: str) -> None:
        """Rule: discovery skips ruff's default `exclude` (build, dist, .venv, node_modules, …). Flag: the
        files are named one by one (no `--force-exclude`)."""
        out = _check("run_ruff", tmp_path, {f"{folder}/calc.py": self.LINT})
        assert (out.facts["findings"], out.facts["files"]) == (1, 1), out.output

    def test_noqa_comments_the_code_wrote_do_not_silence_it(self, tmp_path: Path) -> None:
        """Rule: `# noqa` and `# ruff: noqa` silence findings. Flag: `--ignore-noqa` (unless the task declares
        its own configuration)."""
        files = {"calc.py": "import os  # noqa: F401\n", "other.py": "# ruff: noqa\nimport sys\n"}
        assert _check("run_ruff", tmp_path, files).facts["findings"] == 2
