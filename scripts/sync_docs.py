"""Regenerate the generated parts of the docs: docs/configuration.md's settings table and `.env.example`.

Run by `make docs`; `tests/test_docs.py` fails when either has drifted from the settings model.
"""

from __future__ import annotations

import re
from pathlib import Path

from pse.config import env_example, settings_table

ROOT = Path(__file__).resolve().parents[1]
CONFIGURATION = ROOT / "docs" / "configuration.md"
START, END = "<!-- settings-table:start -->", "<!-- settings-table:end -->"


def main() -> None:
    text = CONFIGURATION.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(START) + ".*?" + re.escape(END), re.DOTALL)
    if len(pattern.findall(text)) != 1:
        raise SystemExit(f"{CONFIGURATION}: expected one {START} … {END} block to regenerate")
    table = f"{START}\n{settings_table()}\n{END}"
    CONFIGURATION.write_text(pattern.sub(lambda _: table, text), encoding="utf-8")
    (ROOT / ".env.example").write_text(env_example(), encoding="utf-8")
    print("docs/configuration.md settings table and .env.example regenerated")


if __name__ == "__main__":
    main()
