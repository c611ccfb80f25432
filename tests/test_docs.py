"""The generated parts of the docs match the code, and every package's `__all__` is real."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from pse.config import Settings, env_example, settings_table

ROOT = Path(__file__).resolve().parents[1]


def test_readme_settings_table_matches_the_settings_model() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert settings_table() in readme, "README's settings table is stale: run `make docs`"


def test_env_example_lists_every_variable() -> None:
    text = (ROOT / ".env.example").read_text(encoding="utf-8")
    assert text == env_example(), ".env.example is stale: run `make docs`"
    for name in Settings.model_fields:
        assert f"PSE_{name.upper()}=" in text


def test_readme_states_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make demo" in readme and "make test" in readme


@pytest.mark.parametrize(
    "package",
    [
        "pse",
        "pse.protocol",
        "pse.sandbox",
        "pse.tools",
        "pse.toolagent",
        "pse.models",
        "pse.team",
        "pse.engine",
        "pse.tasks",
        "pse.cli",
        "pse.events",
        "pse.config",
        "pse.exceptions",
        "pse.knowledge",
        "pse.web",
        "pse.history",
        "pse.runner",
    ],
)
def test_every_exported_name_exists(package: str) -> None:
    module = importlib.import_module(package)
    exported = module.__all__
    assert len(exported) == len(set(exported)), "duplicate names in __all__"
    for name in exported:
        assert hasattr(module, name), f"{package}.__all__ names {name!r}, which does not exist"
