"""Embedders: text → unit vectors. MiniLM from a package, offline hashing, Ollama, OpenAI-compatible APIs.

`PSE_KB_BACKEND=auto` (the default) is MiniLM when the `embeddings` extra is installed and the hashing
embedder otherwise (`choose_backend` says which, and why).

Every embedder has an `identity` the index manifest keeps: when it changes (another backend or model),
the next build re-embeds everything, because vectors of two models cannot be compared. Provider SDK
errors are translated here into `EmbeddingBackendError`, whose message says what to do.
"""

from __future__ import annotations

import itertools
import math
import zlib
from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple, Protocol

import httpx
import numpy as np
from numpy.typing import NDArray

from pse.config import Settings
from pse.exceptions import ConfigError, EmbeddingBackendError
from pse.knowledge._minilm import EXTRA_HINT, MiniLMEmbedder, minilm_missing
from pse.knowledge._text import tokenize

__all__ = [
    "DEFAULT_EMBEDDING_MODELS",
    "BackendChoice",
    "Embedder",
    "HashingEmbedder",
    "OllamaEmbedder",
    "OpenAIEmbedder",
    "backend_of",
    "choose_backend",
    "create_embedder",
]

DEFAULT_EMBEDDING_MODELS = {"ollama": "nomic-embed-text", "openai": "text-embedding-3-small"}
EMBED_BATCH = 32
"""Texts per embeddings request."""
_OFFLINE_HINT = "or set PSE_KB_BACKEND=offline to use the built-in embeddings that need no server"

Vectors = NDArray[np.float32]


class Embedder(Protocol):
    """Turns texts into L2-normalised float32 rows (one per text, same width for every call)."""

    @property
    def identity(self) -> str:
        """Backend and model, e.g. `ollama:nomic-embed-text`; a change forces a full re-embed."""
        ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed `texts` (raises EmbeddingBackendError when the backend fails)."""
        ...


def _normalise(rows: Vectors) -> Vectors:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    out: Vectors = (rows / np.where(norms == 0, 1, norms)).astype(np.float32)
    return out


class HashingEmbedder:
    """Offline embeddings with no model and no download: hashed word, word-pair and character n-gram counts.

    Each feature family (stemmed words, adjacent word pairs, character 3-5-grams of words) is counted with
    sublinear term frequency (1 + log tf), normalised, weighted, and hashed with a sign bit into `dim`
    buckets (the hashing trick). Word features match exact terms; character n-grams match variants and
    compounds (`reconcile` / `reconciliation`, `p99`). The query side is weighted by inverse document
    frequency at search time (see `KnowledgeBase`), which makes the whole a TF-IDF similarity.

    Args:
        dim: vector width, a power of two.
        weights: weight of the word, pair and n-gram families.
    """

    def __init__(self, dim: int = 4096, weights: tuple[float, float, float] = (1.0, 0.5, 1.0)) -> None:
        if dim <= 0 or dim & (dim - 1):
            raise ValueError(f"dim must be a power of two, got {dim}")
        self.dim = dim
        self.weights = weights

    @property
    def identity(self) -> str:
        w = ",".join(f"{x:g}" for x in self.weights)
        return f"offline:hashing-v1:dim={self.dim}:w={w}"

    def _features(self, text: str) -> list[Counter[str]]:
        tokens = tokenize(text)
        pairs = Counter(f"{a} {b}" for a, b in itertools.pairwise(tokens))
        grams: Counter[str] = Counter()
        for token in tokens:
            padded = f"<{token}>"
            for n in (3, 4, 5):
                grams.update(padded[i : i + n] for i in range(len(padded) - n + 1))
        return [Counter(tokens), pairs, grams]

    def embed(self, texts: Sequence[str]) -> Vectors:
        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        mask = self.dim - 1
        for r, text in enumerate(texts):
            for family, (counts, weight) in enumerate(zip(self._features(text), self.weights, strict=True)):
                if not counts or weight == 0:
                    continue
                values = {f: 1 + math.log(c) for f, c in counts.items()}
                scale = weight / math.sqrt(sum(v * v for v in values.values()))
                for feature, value in values.items():
                    h = zlib.crc32(f"{family}:{feature}".encode())
                    rows[r, h & mask] += scale * value * (1.0 if (h >> 20) & 1 else -1.0)
        return _normalise(rows)


class OllamaEmbedder:
    """Embeddings from an Ollama server's `/api/embed`.

    Args:
        model: an embedding model the server has pulled (e.g. nomic-embed-text).
        host: the server (None: http://127.0.0.1:11434).
        timeout_s: timeout of one request.
    """

    def __init__(self, model: str, host: str | None, timeout_s: float) -> None:
        self.model = model
        self.host = host or "http://127.0.0.1:11434"
        self._timeout_s = timeout_s

    @property
    def identity(self) -> str:
        return f"ollama:{self.model}"

    def embed(self, texts: Sequence[str]) -> Vectors:
        import ollama  # the SDK is only needed when this backend is chosen

        rows: list[list[float]] = []
        # One client per call, closed after it: an embedder may live as long as the process, sockets not.
        client = ollama.Client(host=self.host, timeout=self._timeout_s)
        try:
            for start in range(0, len(texts), EMBED_BATCH):
                response = client.embed(model=self.model, input=list(texts[start : start + EMBED_BATCH]))
                rows.extend(list(map(float, e)) for e in response.embeddings)
        except (ollama.ResponseError, ConnectionError, httpx.HTTPError) as exc:
            raise EmbeddingBackendError(
                f"the Ollama embeddings API at {self.host} failed for model {self.model!r}: "
                f"{type(exc).__name__}: {str(exc).strip()[:300]}. Start it (`ollama serve`), pull the "
                f"model (`ollama pull {self.model}`), check PSE_KB_HOST and PSE_KB_MODEL, {_OFFLINE_HINT}"
            ) from exc
        finally:
            client.close()  # type: ignore[no-untyped-call]  # the ollama SDK leaves it untyped
        return _checked(rows, len(texts), self.identity)


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible `/embeddings` endpoint (OpenAI, vLLM, LM Studio, llama.cpp).

    Args:
        model: the embedding model name.
        base_url: the API base URL (None: OpenAI's).
        api_key: the key; a local server without auth may be given any value.
        timeout_s: timeout of one request.
    """

    def __init__(self, model: str, base_url: str | None, api_key: str, timeout_s: float) -> None:
        self.model = model
        self.base_url = base_url or "https://api.openai.com/v1"
        self._api_key = api_key
        self._timeout_s = timeout_s

    @property
    def identity(self) -> str:
        return f"openai:{self.model}"

    def embed(self, texts: Sequence[str]) -> Vectors:
        import openai  # the SDK is only needed when this backend is chosen

        rows: list[list[float]] = []
        client = openai.OpenAI(
            api_key=self._api_key, base_url=self.base_url, timeout=self._timeout_s, max_retries=1
        )
        try:
            for start in range(0, len(texts), EMBED_BATCH):
                batch = list(texts[start : start + EMBED_BATCH])
                response = client.embeddings.create(model=self.model, input=batch)
                ordered = sorted(response.data, key=lambda item: item.index)
                rows.extend(list(map(float, item.embedding)) for item in ordered)
        except (openai.OpenAIError, httpx.HTTPError) as exc:
            raise EmbeddingBackendError(
                f"the OpenAI-compatible embeddings API at {self.base_url} failed for model "
                f"{self.model!r}: {type(exc).__name__}: {str(exc).strip()[:300]}. Check PSE_KB_BASE_URL, "
                f"PSE_KB_API_KEY and PSE_KB_MODEL, {_OFFLINE_HINT}"
            ) from exc
        finally:
            client.close()
        return _checked(rows, len(texts), self.identity)


def _checked(rows: list[list[float]], expected: int, identity: str) -> Vectors:
    widths = {len(row) for row in rows}
    if len(rows) != expected or len(widths) > 1 or 0 in widths:
        raise EmbeddingBackendError(
            f"{identity} returned {len(rows)} embeddings of widths {sorted(widths)} for {expected} texts; "
            f"check that the model is an embedding model, {_OFFLINE_HINT}"
        )
    if not rows:
        return np.zeros((0, 0), dtype=np.float32)
    return _normalise(np.asarray(rows, dtype=np.float32))


class BackendChoice(NamedTuple):
    """The embedding backend in use and why: `auto` resolved, or the setting as given."""

    backend: str
    reason: str


def choose_backend(settings: Settings) -> BackendChoice:
    """The backend `PSE_KB_BACKEND` means here: `auto` is minilm with the embeddings extra, else offline."""
    if settings.kb_backend != "auto":
        return BackendChoice(settings.kb_backend, f"PSE_KB_BACKEND={settings.kb_backend}")
    missing = minilm_missing()
    if missing is None:
        return BackendChoice("minilm", "PSE_KB_BACKEND=auto: the embeddings extra is installed")
    return BackendChoice(
        "offline",
        f"PSE_KB_BACKEND=auto: the embeddings extra is not installed ({missing}); {EXTRA_HINT} for MiniLM",
    )


def backend_of(identity: str) -> str:
    """The backend part of an embedder identity (`minilm:all-MiniLM-L6-v2@0.1.2` → `minilm`)."""
    return identity.split(":", 1)[0]


def create_embedder(settings: Settings) -> Embedder:
    """The embedder `settings` configure (PSE_KB_BACKEND, PSE_KB_MODEL, PSE_KB_BASE_URL, PSE_KB_API_KEY).

    Raises:
        ConfigError: minilm is asked for without the embeddings extra, or the openai backend has neither
            a key nor a base URL.
    """
    backend = choose_backend(settings).backend
    if backend == "offline":
        return HashingEmbedder()
    if backend == "minilm":
        missing = minilm_missing()
        if missing is not None:
            raise ConfigError(f"PSE_KB_BACKEND=minilm needs the embeddings extra ({missing}): {EXTRA_HINT}")
        return MiniLMEmbedder()
    model = settings.kb_model or DEFAULT_EMBEDDING_MODELS[backend]
    if backend == "ollama":
        return OllamaEmbedder(model, settings.kb_base_url, settings.kb_timeout_s)
    key = settings.kb_api_key or settings.api_key
    if key is None and settings.kb_base_url is None:
        raise ConfigError(
            "PSE_KB_BACKEND=openai needs PSE_KB_API_KEY (or PSE_API_KEY), or PSE_KB_BASE_URL of a local "
            f"server; {_OFFLINE_HINT}"
        )
    # A local OpenAI-compatible server often has no auth, but the SDK insists on some key.
    secret = key.get_secret_value() if key is not None else "no-key"
    return OpenAIEmbedder(model, settings.kb_base_url, secret, settings.kb_timeout_s)
