# ruff: noqa: E501  (the demo's plan and turns are long literal text, kept one per line to read as the cassette does)
"""Write tasks/package-steps/cassette.json: the scripted turns of the steps demo (three steps, S2 and S3
at once, S3 once PARTIAL and retried alone, then the final review). Run it after changing the demo."""

from __future__ import annotations

import json
from pathlib import Path

from pse.protocol import render_tool_calls

ROOT = Path(__file__).resolve().parents[1]

TEXTSTATS = '''"""Word statistics of a text."""

import re
from collections import Counter

_WORD = re.compile(r"[a-z0-9']+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def word_count(text: str) -> int:
    """How many words `text` holds (runs of letters, digits and apostrophes)."""
    return len(_words(text))


def top_words(text: str, n: int) -> list[tuple[str, int]]:
    """The `n` most frequent lower-cased words, most frequent first, ties alphabetical."""
    counts = Counter(_words(text))
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:n]
'''

TESTS = '''"""Tests for textstats."""

from textstats import top_words, word_count


def test_empty_text() -> None:
    assert word_count("") == 0
    assert top_words("", 3) == []


def test_punctuation_and_case() -> None:
    assert word_count("Hello, hello! It's me.") == 4
    assert top_words("Hello, hello! It's me.", 1) == [("hello", 2)]


def test_ties_are_alphabetical() -> None:
    assert top_words("b a c b a c", 3) == [("a", 2), ("b", 2), ("c", 2)]


def test_n_larger_than_the_vocabulary() -> None:
    assert top_words("one two", 10) == [("one", 1), ("two", 1)]
'''

CLI_TESTS = '''"""Tests for cli."""

from cli import main


def test_main_prints_the_count_and_the_top_words(tmp_path, capsys) -> None:
    sample = tmp_path / "sample.txt"
    sample.write_text("the cat and the hat and the bat", encoding="utf-8")
    assert main([str(sample), "--top", "2"]) == 0
    assert capsys.readouterr().out.splitlines() == ["words: 8", "the 3", "and 2"]
'''

CLI_BAD = '''"""Command line: word statistics of a text file."""

import sys

from textstats import top_words, word_count


def main(argv: list[str]) -> int:
    text = open(argv[0], encoding="utf-8").read()
    print(word_count(text))
    for word, count in top_words(text, 3):
        print(word, count)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
'''

CLI = '''"""Command line: word statistics of a text file."""

import argparse
import sys
from pathlib import Path

from textstats import top_words, word_count


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Word statistics of a text file.")
    parser.add_argument("path")
    parser.add_argument("--top", type=int, default=3)
    args = parser.parse_args(argv)
    text = Path(args.path).read_text(encoding="utf-8")
    print(f"words: {word_count(text)}")
    for word, count in top_words(text, args.top):
        print(f"{word} {count}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
'''

PLAN = """<plan>
  <goal>textstats.py with word_count and top_words, its pytest tests, and cli.py printing the counts</goal>
  <step id="S1">Write textstats.py with word_count and top_words as the task specifies</step>
  <step id="S2" depends_on="S1">Write test_textstats.py covering empty text, punctuation, case, ties and n larger than the vocabulary</step>
  <step id="S3" depends_on="S1">Write cli.py whose main(argv) prints "words: N" and the top words (--top N, default 3), and test_cli.py testing main on a sample file</step>
  <criterion id="AC1" step="S1">word_count and top_words behave as specified (case, punctuation, ties)</criterion>
  <criterion id="AC2" step="S2">test_textstats.py tests every listed case and its tests pass</criterion>
  <criterion id="AC3" step="S3">main(argv) prints "words: N" then one "WORD COUNT" line per top word, honours --top, returns 0</criterion>
  <criterion id="AC4">pytest and ruff pass on the whole workspace</criterion>
  <output path="textstats.py" step="S1"/>
  <output path="test_textstats.py" step="S2"/>
  <output path="cli.py" step="S3"/>
  <output path="test_cli.py" step="S3"/>
</plan>"""

CHECK_MODULE = (
    'python -c "from textstats import top_words, word_count; '
    "print(word_count(\\\"Hello, hello! It's me.\\\"), top_words('b a c b a c', 2), top_words('', 3))\""
)
CHECK_CLI = (
    "printf 'the cat and the hat and the bat' > \"$TMPDIR/sample.txt\" && "
    "python -c \"import cli, os; print(cli.main([os.environ['TMPDIR'] + '/sample.txt', '--top', '2']))\""
)


def turn(role: str, content: str, step: str | None = None) -> dict[str, str]:
    return {"role": role, "content": content} | ({"step": step} if step else {})


def report(artifacts: str, evidence: str) -> str:
    return f"<report>\nArtifacts: {artifacts}\nEvidence: {evidence}\nAssumptions: none\nUnresolved: none\n</report>"


def verdict(status: str, code: str, criteria: list[tuple[str, bool, str]], summary: str) -> str:
    rows = "\n".join(f'  <criterion id="{c}" met="{str(m).lower()}">{f}</criterion>' for c, m, f in criteria)
    return f'<verdict status="{status}">\n  <reason_code>{code}</reason_code>\n{rows}\n  <summary>{summary}</summary>\n</verdict>'


def main() -> None:
    turns = [
        turn("Planner", PLAN),
        turn(
            "Specialist",
            "I will write the module.\n"
            + render_tool_calls([("write_file", {"path": "textstats.py", "content": TEXTSTATS})]),
            "S1",
        ),
        turn(
            "Specialist",
            report("textstats.py", "written with write_file; words are lower-cased runs of [a-z0-9']"),
            "S1",
        ),
        turn(
            "Evaluator",
            "I will read the module and run it.\n"
            + render_tool_calls(
                [("read_file", {"path": "textstats.py"}), ("bash", {"command": CHECK_MODULE})]
            ),
            "S1",
        ),
        turn(
            "Evaluator",
            verdict(
                "PASS",
                "ALL_MET",
                [
                    (
                        "AC1",
                        True,
                        "word_count gives 4 for the punctuation case, ties are alphabetical, empty text gives []",
                    )
                ],
                "the module behaves as specified",
            ),
            "S1",
        ),
        turn(
            "Specialist",
            "I will write the tests.\n"
            + render_tool_calls([("write_file", {"path": "test_textstats.py", "content": TESTS})]),
            "S2",
        ),
        turn(
            "Specialist",
            report(
                "test_textstats.py",
                "four tests: empty, punctuation and case, ties, n larger than the vocabulary",
            ),
            "S2",
        ),
        turn(
            "Evaluator",
            "I will run the tests.\n" + render_tool_calls([("run_pytest", {"target": "test_textstats.py"})]),
            "S2",
        ),
        turn(
            "Evaluator",
            verdict(
                "PASS",
                "ALL_MET",
                [("AC2", True, "4 tests cover the listed cases and pass")],
                "the tests cover the cases and pass",
            ),
            "S2",
        ),
        turn(
            "Specialist",
            "I will write the command line and its test.\n"
            + render_tool_calls(
                [
                    ("write_file", {"path": "cli.py", "content": CLI_BAD}),
                    ("write_file", {"path": "test_cli.py", "content": CLI_TESTS}),
                ]
            ),
            "S3",
        ),
        turn("Specialist", report("cli.py, test_cli.py", "main reads the file and prints the counts"), "S3"),
        turn(
            "Evaluator",
            "I will run the command line on a sample.\n"
            + render_tool_calls([("read_file", {"path": "cli.py"}), ("bash", {"command": CHECK_CLI})]),
            "S3",
        ),
        turn(
            "Evaluator",
            verdict(
                "PARTIAL",
                "OUTPUT_FORMAT",
                [
                    (
                        "AC3",
                        False,
                        "prints the bare count '8' instead of 'words: 8', and ignores --top (it always prints 3 words)",
                    )
                ],
                "the format and --top are wrong",
            ),
            "S3",
        ),
        turn(
            "Specialist",
            "The review says the count line lacks 'words: ' and --top is ignored. I will parse --top and print the right format.\n"
            + render_tool_calls([("write_file", {"path": "cli.py", "content": CLI})]),
            "S3",
        ),
        turn(
            "Specialist",
            report(
                "cli.py (revised)",
                "argparse reads path and --top (default 3); prints 'words: N' then 'WORD COUNT' lines",
            ),
            "S3",
        ),
        turn(
            "Evaluator",
            "I will run the command line again.\n" + render_tool_calls([("bash", {"command": CHECK_CLI})]),
            "S3",
        ),
        turn(
            "Evaluator",
            verdict(
                "PASS",
                "ALL_MET",
                [("AC3", True, "prints 'words: 8', then 'the 3' and 'and 2' for --top 2, and returns 0")],
                "the command line behaves as specified",
            ),
            "S3",
        ),
        turn(
            "Evaluator",
            "The final review: I will run both required checks on the whole workspace.\n"
            + render_tool_calls([("run_pytest", {"target": "."}), ("run_ruff", {"target": "."})]),
        ),
        turn(
            "Evaluator",
            verdict(
                "PASS",
                "ALL_MET",
                [("AC4", True, "pytest: 5 passed; ruff: all checks passed, over the whole workspace")],
                "every step passed its review and the task's checks pass",
            ),
        ),
    ]
    path = ROOT / "tasks" / "package-steps" / "cassette.json"
    path.write_text(json.dumps({"version": 1, "turns": turns}, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {path} ({len(turns)} turns)")


if __name__ == "__main__":
    main()
