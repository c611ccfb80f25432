"""Local models: small model families, packaged, behind a llama.cpp server on loopback.

```python
from pse.local import LOCAL_MODELS, LocalServer

with LocalServer() as server:          # python -m pse.local in a child process, every packaged model
    print(server.url)                  # PSE_PROVIDER=openai PSE_BASE_URL=<this> PSE_MODEL=smollm2-135m
```
Needs the `pse[local]` extra (llama-cpp-python's server and the model packages); nothing is downloaded.
"""

from pse.local._chat_format import GEMMA_FORMAT, gemma_prompt, register_chat_formats
from pse.local._models import (
    GEMMA3,
    LOCAL_MODELS,
    QWEN_CODER_0_5B,
    QWEN_CODER_1_5B,
    SMOLLM2,
    JoinedParts,
    LocalModel,
    default_cache_dir,
    local_model,
)
from pse.local._runs import QWEN_RUN, SHORT_RUN, local_run_settings
from pse.local._server import DEFAULT_THREADS, STARTUP_TIMEOUT_S, STOP_TIMEOUT_S, LocalServer, server_config

__all__ = [
    "DEFAULT_THREADS",
    "GEMMA3",
    "GEMMA_FORMAT",
    "LOCAL_MODELS",
    "QWEN_CODER_0_5B",
    "QWEN_CODER_1_5B",
    "QWEN_RUN",
    "SHORT_RUN",
    "SMOLLM2",
    "STARTUP_TIMEOUT_S",
    "STOP_TIMEOUT_S",
    "JoinedParts",
    "LocalModel",
    "LocalServer",
    "default_cache_dir",
    "gemma_prompt",
    "local_model",
    "local_run_settings",
    "register_chat_formats",
    "server_config",
]
