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
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import httpx

from pse.exceptions import ModelUnavailableError
from pse.local._models import LOCAL_MODELS, LocalModel

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
        entries.append(entry)
    return {"host": host, "port": port, "models": entries}


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class LocalServer:
    """`python -m pse.local` as a child process on loopback; a context manager.

    Args:
        models: the models it serves (the first is loaded at start).
        threads: threads per model.
        log: where the server's output goes (default: discarded).
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
        if self.cache_dir is not None:
            command += ["--cache-dir", str(self.cache_dir)]
        self._log_file = self.log.open("ab") if self.log is not None else None
        output = self._log_file if self._log_file is not None else subprocess.DEVNULL
        started = time.monotonic()
        self._process = subprocess.Popen(command, stdout=output, stderr=output, start_new_session=True)
        self._wait_ready(started)
        self.startup_s = time.monotonic() - started
        return self

    def _wait_ready(self, started: float) -> None:
        where = f"; its log: {self.log}" if self.log is not None else ""
        assert self._process is not None
        while time.monotonic() - started < STARTUP_TIMEOUT_S:
            code = self._process.poll()
            if code is not None:
                self.stop()
                raise ModelUnavailableError(f"the local model server exited with status {code}{where}")
            try:
                if httpx.get(f"{self.url}/models", timeout=2.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.25)
        self.stop()
        raise ModelUnavailableError(
            f"the local model server did not answer within {STARTUP_TIMEOUT_S:.0f} s "
            f"(STARTUP_TIMEOUT_S){where}"
        )

    def stop(self) -> None:
        """Stop the server (SIGTERM to its process group, SIGKILL after `STOP_TIMEOUT_S`)."""
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

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
