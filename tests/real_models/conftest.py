"""The real-model suite's fixtures: one llama.cpp server on loopback for the session, the two tiny models.

Selected by `make test-models` (`-m real_model`); the default `make test` deselects it, so it stays
offline and fast. The runs are kept short on purpose (`pse.local.SHORT_RUN`): CI runs this suite on
2 cores.
Every run's figures are collected and printed at the end of the session, and saved to
`runs/test-models/figures.json` beside the repository's other run output.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pse.config import load_settings
from pse.doctor import WireFeatures, pse_sends
from pse.local import GEMMA3, SMOLLM2, LocalServer
from pse.roles import ROLES
from real_models._support import FIGURES


@pytest.fixture(scope="session")
def local_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    """`python -m pse.local` serving both packaged models, started once, stopped at the end."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("the local models are not installed: run `make test-models` (pip install 'pse[local]')")
    log = tmp_path_factory.mktemp("local-server") / "server.log"
    with LocalServer([SMOLLM2, GEMMA3], log=log) as server:  # the Qwen test starts its own (test_qwen.py)
        FIGURES.append({"server_startup_s": round(server.startup_s, 2)})
        yield server


_WIRE: dict[str, WireFeatures] = {}


@pytest.fixture
def pse_constraint() -> WireFeatures:
    """What PSE sends with `PSE_CONSTRAIN=grammar` (for every role), read off the wire of a stand-in.

    Function-scoped so it runs inside the clean environment of `tests/conftest.py`; probed once."""
    if "grammar" not in _WIRE:
        roles = {f"{role.lower()}_constrain": "grammar" for role in ROLES}
        _WIRE["grammar"] = asyncio.run(pse_sends(load_settings(constrain="grammar", **roles)))
    return _WIRE["grammar"]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    runs = [f for f in FIGURES if "config" in f]
    write = terminalreporter.write_line
    for f in FIGURES:
        if "run_limit" in f:
            limit = f["run_limit"]
            write(
                f"run limit {limit['limit_s']} s against llama.cpp: TIMEOUT after {limit['wall_s']} s, "
                f"{limit['answered']} answered call(s) counted exactly"
            )
    if not runs:
        return
    write("")
    write("real-model runs (parse: role turns that parsed on the first try / after a repair / all turns):")
    for f in runs:
        p = f["parse"]
        write(
            f"  {f['config']:<13} {f['models']:<28} {f['task']:<16} {f['outcome']!s:<9} "
            f"cycles {f['cycles']}  parse {p['first_try']}/{p['after_repair']}/{p['turns']}  "
            f"tool calls {f['tool_calls']}  tokens {f['tokens']}  wall {f['wall_s']} s"
        )
    target = Path(terminalreporter.config.rootpath) / "runs" / "test-models" / "figures.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(FIGURES, indent=2) + "\n")
    write(f"figures saved to {target}")
