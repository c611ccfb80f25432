"""The local models behind one OpenAI-compatible llama.cpp server on loopback.

`server_config` is llama-cpp-python's multi-model config (`--config_file` JSON: a `models` list);
`LocalServer` runs `python -m pse.local` (that config, with PSE's chat formats registered) as a
child process and stops it. The server holds one model in memory at a time and swaps on demand,
so a run whose roles use both models pays a model load (well under a second here) at each switch.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import httpx

from pse.exceptions import ModelUnavailableError
from pse.local._models import LOCAL_MODELS, LocalModel
from pse.models import note_started_server

__all__ = ["DEFAULT_THREADS", "STARTUP_TIMEOUT_S", "STOP_TIMEOUT_S", "LocalServer", "server_config"]

DEFAULT_THREADS = 2
STARTUP_TIMEOUT_S = 120.0
"""Longest wait for the server to load its first model and answer `GET /v1/models`."""
STOP_TIMEOUT_S = 10.0
"""Longest wait for the server to exit after SIGTERM before it is killed."""


def server_config(
    models: Sequence[LocalModel] = LOCAL_MODELS,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    threads: int = DEFAULT_THREADS,
    cache_dir: Path | None = None,
) -> dict[str, Any]:
    """llama-cpp-python's server config for `models` (the first is loaded at start and is the default).

    `logits_all` is off (the server's default keeps every position's logits: about 8 GB for these
    models instead of under 1 GB) and each model gets `threads` threads.

    Raises:
        ConfigError: a model's package is not installed.
    """
    entries = []
    for model in models:
        entry: dict[str, Any] = {
            "model": str(model.path(cache_dir)),
            "model_alias": model.alias,
            "n_ctx": model.n_ctx,
            "n_threads": threads,
            "n_threads_batch": threads,
            "logits_all": False,
            "verbose": False,
        }
        if model.chat_format is not None:
            entry["chat_format"] = model.chat_format
        if model.prompt_cache_bytes:
            entry.update(cache=True, cache_type="ram", cache_size=model.prompt_cache_bytes)
        entries.append(entry)
    return {"host": host, "port": port, "models": entries}


def _last_line(log: Path | None) -> str:
    """The last non-empty line of the server's log, for a message ("its log is empty" if none)."""
    try:
        with log.open("rb") as handle:  # type: ignore[union-attr]
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - 4096))
            lines = [line for line in handle.read().decode(errors="replace").splitlines() if line.strip()]
    except (OSError, AttributeError):
        return "its log could not be read"
    return f"its log's last line: {lines[-1].strip()[:300]!r}" if lines else f"its log ({log}) is empty"


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class LocalServer:
    """`python -m pse.local` as a child process on loopback; a context manager.

    Args:
        models: the models it serves (the first is loaded at start).
        threads: threads per model.
        log: where the server's output goes (default: a temporary file, removed when it stops). A run
            whose calls find the server gone reports its exit status and the log's last line.
        cache_dir: where chunked models are assembled (default: under the virtual environment).
    """

    def __init__(
        self,
        models: Sequence[LocalModel] = LOCAL_MODELS,
        *,
        threads: int = DEFAULT_THREADS,
        log: Path | None = None,
        cache_dir: Path | None = None,
    ) -> None:
        self.models = tuple(models)
        self.threads = threads
        self.log = log
        self.cache_dir = cache_dir
        self.host = "127.0.0.1"
        self.port = 0
        self.startup_s = 0.0
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._own_log: Path | None = None
        self._forget: Callable[[], None] | None = None

    @property
    def url(self) -> str:
        """The OpenAI base URL (`PSE_BASE_URL`): `http://127.0.0.1:PORT/v1`."""
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> LocalServer:
        """Start the server and wait until it answers, at most `STARTUP_TIMEOUT_S`.

        Raises:
            ConfigError: a model's package is missing.
            ModelUnavailableError: the server exited or did not answer in time (its log says why).
        """
        for model in self.models:
            model.path(self.cache_dir)  # assemble now, and fail here, not inside the child
        self.port = _free_port(self.host)
        command = [sys.executable, "-m", "pse.local", "--host", self.host, "--port", str(self.port)]
        command += ["--threads", str(self.threads), "--models", ",".join(m.alias for m in self.models)]
        command += ["--exit-with", str(os.getpid())]  # its own session: it must notice this process end
        if self.cache_dir is not None:
            command += ["--cache-dir", str(self.cache_dir)]
        if self.log is None:
            handle, name = tempfile.mkstemp(prefix="pse-local-", suffix=".log")
            os.close(handle)
            self.log = self._own_log = Path(name)
        self._log_file = self.log.open("ab")
        started = time.monotonic()
        self._process = subprocess.Popen(
            command, stdout=self._log_file, stderr=self._log_file, start_new_session=True
        )
        self._wait_ready(started)
        self.startup_s = time.monotonic() - started
        self._forget = note_started_server(self.url, self._last_words)
        return self

    def _last_words(self) -> str | None:
        """How the server ended, if it did: its exit status and the last line of its log."""
        process = self._process
        code = process.poll() if process is not None else None
        if process is None or code is None:
            return None
        how = f"signal {-code} ({signal.Signals(-code).name})" if code < 0 else f"status {code}"
        return f"PSE's local server (pid {process.pid}) exited with {how}; {_last_line(self.log)}"

    def _wait_ready(self, started: float) -> None:
        where = f"; its log: {self.log}" if self._own_log is None else ""
        assert self._process is not None
        while time.monotonic() - started < STARTUP_TIMEOUT_S:
            if self._process.poll() is not None:
                ended = self._last_words()
                self.stop()
                raise ModelUnavailableError(f"the local model server did not start: {ended}{where}")
            try:
                if httpx.get(f"{self.url}/models", timeout=2.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.25)
        last = _last_line(self.log)
        self.stop()
        raise ModelUnavailableError(
            f"the local model server did not answer within {STARTUP_TIMEOUT_S:.0f} s "
            f"(STARTUP_TIMEOUT_S); {last}{where}"
        )

    def stop(self) -> None:
        """Stop the server (SIGTERM to its process group, SIGKILL after `STOP_TIMEOUT_S`)."""
        if self._forget is not None:
            self._forget()  # stopped on purpose: no run should take it for a crash
            self._forget = None
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self._own_log is not None:
            self._own_log.unlink(missing_ok=True)
            self.log = self._own_log = None

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
