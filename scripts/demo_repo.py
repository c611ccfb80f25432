"""`make demo-repo`: the built-in `code-change` task on a small repository, offline.

Builds a real small Python package with a bug and its tests as a git repository in a temporary folder
(with an uncommitted edit, to show it is left alone), runs `pse run code-change --repo … --input REQUEST=…`
with the task's cassette, and prints the run's branch, its commit and `change.patch`.

    python scripts/demo_repo.py            # in a temporary folder, removed afterwards
    python scripts/demo_repo.py --keep DIR # in DIR, kept: look at the repository and the run afterwards
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REQUEST = (
    "word_count counts empty strings when words are separated by more than one space or by a newline; "
    "make it count the words only"
)
FILES = {
    "textstats/__init__.py": '"""Small statistics of a text."""\n\nfrom textstats.words import word_count\n\n'
    '__all__ = ["word_count"]\n',
    "textstats/words.py": 'def word_count(text: str) -> int:\n    """How many words `text` holds."""\n'
    '    return len(text.split(" ")) if text else 0\n',
    "tests/test_words.py": "from textstats import word_count\n\n\ndef test_one_space():\n"
    '    assert word_count("a b c") == 3\n\n\ndef test_empty():\n    assert word_count("") == 0\n\n\n'
    'def test_runs_of_spaces():\n    assert word_count("a  b") == 2\n\n\n'
    'def test_newlines():\n    assert word_count("one two\\nthree") == 3\n',
    "pyproject.toml": '[project]\nname = "textstats"\nversion = "0.1.0"\n\n[tool.pytest.ini_options]\n'
    'pythonpath = ["."]\n',
    "README.md": "# textstats\n\nSmall statistics of a text.\n",
}


def _git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    }
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, env=env
    )
    return done.stdout


def make_demo_repo(root: Path) -> Path:
    """The demo's repository under `root`: `textstats` with a bug, its tests, one commit, and an
    uncommitted edit to its README (a run leaves it where it is)."""
    repo = root / "textstats"
    for path, text in FILES.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text, encoding="utf-8")
    _git(root, "init", "-q", "-b", "main", str(repo))
    _git(repo, "config", "user.name", "Demo Person")
    _git(repo, "config", "user.email", "person@example.org")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "textstats: word_count")
    with (repo / "README.md").open("a", encoding="utf-8") as readme:
        readme.write("\nWork in progress, not committed.\n")
    return repo


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="build and run in this folder, and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pse-demo-repo-") as scratch:
        root = args.keep.resolve() if args.keep else Path(scratch)
        root.mkdir(parents=True, exist_ok=True)
        repo = make_demo_repo(root)
        before = _git(repo, "status", "--porcelain")
        pse = Path(sys.executable).with_name("pse")
        command = [str(pse), "run", "code-change", "--repo", str(repo), "--input", f"REQUEST={REQUEST}"]
        command += ["--runs-dir", str(root / "runs"), "--json"]
        print("$", " ".join(command[:5]), "--input REQUEST='…'", flush=True)
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(done.stdout, done.stderr, sep="\n", file=sys.stderr)
            return done.returncode
        summary = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"outcome: {summary['outcome']} after {summary['cycles']} cycle(s)")
        print(f"branch:  {summary['branch']}")
        print(f"commit:  {summary['commit']}")
        kept = "" if args.keep else " (in the temporary folder; printed here, as it goes when the demo ends)"
        print(f"patch:   {summary['patch']}{kept}\n")
        print(Path(summary["patch"]).read_text(encoding="utf-8"))
        untouched = _git(repo, "status", "--porcelain") == before
        print(f"your working tree: {'untouched' if untouched else 'CHANGED'} ({before.strip()})")
        if args.keep:
            print(f"kept: {root} (git -C {repo} log --stat {summary['branch']})")
        else:
            print(
                f"the repository and the run were in {root}, removed now; to keep them and look around, run "
                "make demo-repo DEMO_REPO_ARGS='--keep DIR' (or python scripts/demo_repo.py --keep DIR)"
            )
        return 0 if untouched else 1


if __name__ == "__main__":
    sys.exit(main())
