"""Run every benchmark module, print its figures and save them as JSON under bench/results/.

Each `bench/bench_<name>.py` exposes `run() -> dict` returning plain JSON-able
figures (with units in the key names, e.g. `p50_ms`). Pass module names to run
only some: `python -m bench toolagent models`.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import platform
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv: list[str]) -> int:
    names = sorted(
        m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if m.name.startswith("bench_")
    )
    if argv:
        names = [n for n in names if n.removeprefix("bench_") in argv]
    RESULTS.mkdir(parents=True, exist_ok=True)
    combined: dict[str, object] = {}
    if argv and (RESULTS / "all.json").is_file():  # a subset updates its modules, keeps the others
        combined = json.loads((RESULTS / "all.json").read_text())
    combined |= {
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    for name in names:
        module = importlib.import_module(f"bench.{name}")
        started = time.perf_counter()
        figures = module.run()
        figures["bench_seconds"] = round(time.perf_counter() - started, 2)
        combined[name.removeprefix("bench_")] = figures
        (RESULTS / f"{name.removeprefix('bench_')}.json").write_text(json.dumps(figures, indent=2) + "\n")
        print(f"== {name.removeprefix('bench_')}")
        print(json.dumps(figures, indent=2))
    (RESULTS / "all.json").write_text(json.dumps(combined, indent=2) + "\n")
    print(f"saved to {RESULTS}/")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
