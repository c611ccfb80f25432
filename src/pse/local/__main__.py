"""`python -m pse.local`: serve the packaged local models on an OpenAI-compatible llama.cpp server.

    python -m pse.local [--host 127.0.0.1] [--port 8000] [--threads 2] [--models qwen2.5-coder-1.5b,…]
    python -m pse.local --print-config        # the llama-cpp-python --config_file JSON it serves

Then point PSE at it: `PSE_PROVIDER=openai PSE_BASE_URL=http://127.0.0.1:8000/v1 PSE_MODEL=smollm2-135m`.
Needs the `pse[local]` extra.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

from pse.exceptions import UserError
from pse.local._cache import serve_cached_tokens
from pse.local._chat_format import register_chat_formats
from pse.local._models import LOCAL_MODELS, default_cache_dir, local_model
from pse.local._server import DEFAULT_THREADS, server_config


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m pse.local", description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="listen address (default: loopback)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS, help="threads per model")
    parser.add_argument(
        "--models",
        default=",".join(m.alias for m in LOCAL_MODELS),
        help="comma-separated aliases; the first is loaded at start",
    )
    parser.add_argument(
        "--cache-dir", type=Path, default=None, help=f"assembled models (default {default_cache_dir()})"
    )
    parser.add_argument("--print-config", action="store_true", help="print the server config and exit")
    parser.add_argument(
        "--exit-with", type=int, default=None, metavar="PID", help="exit when process PID, the parent, ends"
    )
    return parser.parse_args(argv)


def exit_with_parent(pid: int, *, interval_s: float = 1.0) -> threading.Thread:
    """Exit this process once `pid`, its parent, has ended (it is then re-parented): a server started by
    `LocalServer` in its own session gets no terminal signal, and one whose owner was killed (SIGKILL, a
    CI timeout) went on holding the model and both cores."""

    def watch() -> None:
        while os.getppid() == pid:
            time.sleep(interval_s)
        os._exit(0)  # nobody is left to serve; the model's memory goes back with the process

    thread = threading.Thread(target=watch, name="pse-local-exit-with-parent", daemon=True)
    thread.start()
    return thread


def main(argv: list[str]) -> int:
    args = _arguments(argv)
    if args.exit_with is not None:
        exit_with_parent(args.exit_with)
    try:
        models = [local_model(alias.strip()) for alias in args.models.split(",") if alias.strip()]
        config = server_config(
            models, host=args.host, port=args.port, threads=args.threads, cache_dir=args.cache_dir
        )
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.print_config:
        print(json.dumps(config, indent=2))
        return 0
    try:
        import uvicorn
        from llama_cpp import Llama
        from llama_cpp.server.app import create_app
        from llama_cpp.server.settings import ConfigFileSettings, ServerSettings
    except ImportError as exc:
        print(f"error: {exc}; install the local models with `pip install 'pse[local]'`", file=sys.stderr)
        return 2
    register_chat_formats()
    settings = ConfigFileSettings.model_validate(config)
    app = create_app(server_settings=ServerSettings.model_validate(settings), model_settings=settings.models)
    serve_cached_tokens(app, Llama)  # usage.prompt_tokens_details.cached_tokens, as OpenAI reports it
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
