"""PSE's pytest plugin, loaded by `run_pytest` with `-p pse._pytest_plugin`.

pytest runs with the append import mode, so no module of the workspace can shadow the standard library
or pytest itself. The Evaluator's own tests live outside the workspace and still need to import the
workspace's modules: this plugin appends the workspace (pytest's rootdir) to the end of `sys.path`.
"""

from __future__ import annotations

import sys

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Make the workspace importable, after everything installed."""
    root = str(config.rootpath)
    if root not in sys.path:
        sys.path.append(root)
