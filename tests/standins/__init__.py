"""Loopback stand-ins of the model HTTP APIs PSE talks to, for tests only.

`ChatStandIn("openai")` speaks OpenAI's `POST /v1/chat/completions` (JSON or SSE
streaming); `ChatStandIn("ollama")` speaks Ollama's `POST /api/chat` (JSON or NDJSON
streaming). Each listens on 127.0.0.1 on a free port, records every request it
receives and plays scripted replies in order (`Reply`), falling back to a default
success once the script runs out.

`ModelServerStandIn` imitates a llama.cpp-style server for `pse doctor`: model list, grammars, tools.
"""

from standins._model_server import ModelServerStandIn
from standins._server import ChatStandIn, RecordedRequest, Reply

__all__ = ["ChatStandIn", "ModelServerStandIn", "RecordedRequest", "Reply"]
