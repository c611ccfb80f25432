"""The checking process: pytest over one author's tests, reaching the delivered code only through the product.

Usage (PSE starts it in the sandbox, beside the product process it talks to)::

    python -I -m pse.product._checker --channel R,W --report N --call-timeout S \\
        --area workspace=PATH [--area evaluation=PATH] [--native FILE ...] -- PYTEST_ARGS

Before pytest loads anything, this process makes itself non-dumpable (no process of its uid may read
its memory or descriptors), makes the channel and report descriptors non-inheritable (no child of a
test gets them), puts `ProductFinder` first on `sys.meta_path` and installs an audit hook. Then pytest
runs the given test files with this module as a plugin, which writes the record PSE judges the run by
to the report descriptor, one JSON object a line, as things happen:

    {"kind": "started"}  {"kind": "no_product", "why"}  {"kind": "configured"}
    {"kind": "imported", "module", "file"}
    {"kind": "collected", "ids"}  {"kind": "collect_error", "id", "text"}
    {"kind": "test", "id", "outcome", "message", "where", "at", "ran"}  {"kind": "in_process", "file", "how"}
    {"kind": "finished", "exit"}

A test's id is pytest's node id with its file named inside its area (`test_x.py::test_a`, or
`@evaluation/test_y.py::test_b` for the Evaluator's own tests), whatever folder the snapshot is in.

`where` is `file:line` of the workspace file's line a failing test's exception was raised at in the
product, read from the product's traceback ("" when none); `at` the line of a workspace file where it
surfaced here (a test's failing `assert`). `ran` counts the calls the test made into
each workspace file (the product says which file a called function lives in). `in_process` says that
code of the snapshot that is not the session's own was compiled or loaded here (a test that `exec`s
the delivered file, or `runpy`s it): this session's record is then no evidence, and the record says so
before that code can run. The product never holds the report descriptor; what it prints reaches
pytest's captured output, never the record.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from pse.product._channel import Broken
from pse.product._imports import ProductFinder
from pse.product._proxies import Product
from pse.product._wire import make_undumpable

__all__ = ["main"]

_ORDER = {"passed": 0, "skipped": 1, "failed": 2, "errors": 3}
_HELLO_S = 30.0
"""How long the check waits for its product process to start."""
_TEXT_CHARS = 4000
"""Most characters of one failure's text in the record (PSE keeps its first line)."""
_FRAME = re.compile(r'File "([^"\n]+)", line (\d+)')
"""A frame of the product's traceback, as pytest shows it in a failure (the exception's note)."""


class Report:
    """The record, written to PSE's pipe a line at a time."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def write(self, kind: str, **fields: Any) -> None:
        data = memoryview((json.dumps({"kind": kind, **fields}) + "\n").encode())
        while data:
            data = data[os.write(self._fd, data) :]


class Recorder:
    """The pytest plugin: each collected test, each outcome and the calls it made, as they happen."""

    def __init__(self, report: Report, product: Product, areas: dict[str, str]) -> None:
        self.report, self.product = report, product
        self._areas = {name: os.path.realpath(path) for name, path in areas.items()}
        self._outcome: dict[str, Any] = {}

    def named(self, nodeid: str, path: object) -> str:
        """The node id with its file named inside its area."""
        real = os.path.realpath(str(path))
        for name, root in self._areas.items():
            if real.startswith(root + os.sep):
                file = os.path.relpath(real, root)
                file = file if name == "workspace" else f"@{name}/{file}"
                _, sep, rest = nodeid.partition("::")
                return file + sep + rest
        return nodeid

    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        manager = config.pluginmanager
        considered = manager.consider_module

        def consider_module(mod: Any) -> None:
            if getattr(mod, "pytest_plugins", None):
                raise pytest.UsageError(
                    f"{getattr(mod, '__file__', mod)} asks for plugins (pytest_plugins); under PSE a check's "
                    "plugins come only from the task ([verification] pytest_plugins in task.toml)"
                )
            considered(mod)

        manager.consider_module = consider_module  # type: ignore[method-assign]
        factory = getattr(config, "_tmp_path_factory", None)
        if factory is not None:  # the product runs as another uid where it can: it must reach tmp_path
            made = factory.mktemp

            def shared_mktemp(basename: str, numbered: bool = True) -> Any:
                path = made(basename, numbered)
                for folder in (factory.getbasetemp(), path):
                    os.chmod(folder, 0o1777)  # sticky: the product adds files, never removes the test's
                return path

            factory.mktemp = shared_mktemp
        self.report.write(
            "configured"
        )  # pytest took its configuration: from here on, failures are the work's

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.report.write("collected", ids=[self.named(item.nodeid, item.path) for item in session.items])

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            where = report.fspath if hasattr(report, "fspath") else report.nodeid
            self.report.write(
                "collect_error", id=self.named(report.nodeid, where), text=str(report.longrepr)[-_TEXT_CHARS:]
            )

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        self._outcome = {"id": self.named(item.nodeid, item.path), "outcome": "passed", "message": ""}
        self.product.ran, self.product.counting = {}, True
        try:
            yield
        finally:
            self.product.counting = False
            self.report.write("test", **self._outcome, ran=self.product.ran)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        outcome, message = _outcome(report)
        if _ORDER[outcome] > _ORDER[self._outcome.get("outcome", "passed")]:
            where = self.where(str(report.longrepr)) if report.failed else ""
            self._outcome.update(outcome=outcome, message=message, where=where, at=self.at(report))

    def at(self, report: pytest.TestReport) -> str:
        """`file:line` of the line of a workspace file where a failure surfaced in this process (a test
        file's failing `assert`), or ""."""
        crash = getattr(report.longrepr, "reprcrash", None) if report.failed else None
        path, line, root = (
            getattr(crash, "path", None),
            getattr(crash, "lineno", None),
            self._areas.get("workspace"),
        )
        if not (isinstance(path, str) and type(line) is int and root):
            return ""
        real = os.path.realpath(os.path.join(os.getcwd(), path))
        return f"{os.path.relpath(real, root)}:{line}" if real.startswith(root + os.sep) else ""

    def where(self, text: str) -> str:
        """`file:line` of the innermost frame in a workspace file of the product's traceback that pytest's
        report of a failure (`text`) shows, or "": where the delivered code raised. The product names
        such a frame's file inside the workspace (its snapshot's folder is not this process's)."""
        root, found = self._areas.get("workspace"), ""
        for path, line in _FRAME.findall(text):
            if root and not os.path.isabs(path) and os.path.isfile(os.path.join(root, path)):
                found = f"{os.path.normpath(path)}:{line}"
        return found

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.report.write("finished", exit=int(exitstatus))


def _outcome(report: pytest.TestReport) -> tuple[str, str]:
    """A phase's outcome as the record counts it (an xfail is a skip; a failed setup an error)."""
    if hasattr(report, "wasxfail"):
        if report.when == "call" and report.outcome == "passed":
            return "passed", ""
        if report.outcome != "failed":
            return "skipped", str(report.wasxfail)[:_TEXT_CHARS]
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        return "skipped", str(reason)[:_TEXT_CHARS]
    if report.failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        text = str(getattr(crash, "message", None) or report.longrepr)[:_TEXT_CHARS]
        return ("failed" if report.when == "call" else "errors"), text
    return "passed", ""


def _audit(report: Report, finder: ProductFinder) -> Any:
    """Say at once when code of the product is compiled or loaded in this process (before it runs)."""
    said: set[str] = set()

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "compile" and len(args) > 1:
            where, how = args[1], "compiled here"
        elif event == "exec" and args:
            where, how = getattr(args[0], "co_filename", None), "executed here"
        elif event in ("import", "ctypes.dlopen") and len(args) > 1:
            where, how = (args[1] if event == "import" else args[0]), "loaded here"
        else:
            return
        if isinstance(where, str | bytes) and where and finder.is_product(os.fsdecode(where)):
            file = os.fsdecode(where)
            if file not in said:
                said.add(file)
                report.write("in_process", file=file, how=how)

    return hook


def main(argv: list[str] | None = None) -> int:
    make_undumpable()  # first: nothing of the product's may read this process
    args = sys.argv[1:] if argv is None else argv
    split = args.index("--") if "--" in args else len(args)
    parser = argparse.ArgumentParser(prog="pse.product._checker")
    parser.add_argument("--channel", required=True)
    parser.add_argument("--report", type=int, required=True)
    parser.add_argument("--call-timeout", type=float, default=60.0)
    parser.add_argument("--area", action="append", default=[])
    parser.add_argument("--native", action="append", default=[])
    options = parser.parse_args(args[:split])
    read_fd, write_fd = (int(fd) for fd in options.channel.split(","))
    for fd in (read_fd, write_fd, options.report):
        os.set_inheritable(fd, False)
    report = Report(options.report)
    report.write("started")
    areas = dict(area.split("=", 1) for area in options.area)
    product = Product(read_fd, write_fd, options.call_timeout)
    try:
        product.connection.wait_hello(time.monotonic() + _HELLO_S)
    except Broken as exc:  # the product's server never started: the machinery's failure, not the work's
        report.write("no_product", why=str(exc))
        return 3
    finder = ProductFinder(
        list(areas.values()),
        frozenset(os.path.realpath(p) for p in options.native),
        product.ask,
        lambda module, file: report.write("imported", module=module, file=file),
    )
    sys.meta_path.insert(0, finder)
    sys.path.append(areas["workspace"])  # the Evaluator's own tests, elsewhere, import the delivered code
    sys.addaudithook(_audit(report, finder))
    return int(pytest.main(args[split + 1 :], plugins=[Recorder(report, product, areas)]))


if __name__ == "__main__":
    sys.exit(main())
