"""The embeddings endpoint (`embeddings:` in the configuration): any OpenAI-compatible `/v1/embeddings`.

Its answers are distrusted like any server's: the size read is bounded, every vector must have the
configured dimensions and be finite, and a vector is normalised here (cosine distances then compare
alike whatever the model returns).
"""

from __future__ import annotations

import math
from typing import Any

import httpx
import orjson

from runtime.cpu import run_cpu

from ..config import EmbeddingsConfig

MAX_ANSWER_BYTES = 64 * 1024 * 1024


class EmbeddingsFailed(Exception):
    """The endpoint could not be reached, failed, or answered with something that is not the vectors asked for."""


class Embeddings:
    def __init__(self, config: EmbeddingsConfig) -> None:
        self.config = config
        headers = {"authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        self._http = httpx.AsyncClient(base_url=config.url.rstrip("/"), headers=headers, timeout=config.timeout_s, trust_env=False)

    async def close(self) -> None:
        await self._http.aclose()

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order (several requests of `batch_size` texts)."""
        vectors: list[list[float]] = []
        size = self.config.batch_size
        for start in range(0, len(texts), size):
            vectors += await self._batch(texts[start : start + size])
        return vectors

    async def _batch(self, texts: list[str]) -> list[list[float]]:
        body = {"model": self.config.model, "input": texts, "encoding_format": "float"}
        try:
            async with self._http.stream(
                "POST", "/v1/embeddings", content=orjson.dumps(body), headers={"content-type": "application/json"}
            ) as answer:
                data = bytearray()
                async for part in answer.aiter_bytes():
                    data += part
                    if len(data) > MAX_ANSWER_BYTES:
                        raise EmbeddingsFailed(f"the embeddings endpoint answered with more than {MAX_ANSWER_BYTES} bytes")
                if answer.status_code != 200:
                    raise EmbeddingsFailed(f"the embeddings endpoint answered {answer.status_code}: {bytes(data[:300]).decode(errors='replace')}")
        except httpx.HTTPError as exc:
            raise EmbeddingsFailed(f"the embeddings endpoint cannot be reached ({type(exc).__name__})") from None
        return await run_cpu(_vectors, bytes(data), len(texts), self.config.dimensions)


def _vectors(data: bytes, count: int, dimensions: int) -> list[list[float]]:
    try:
        answer: Any = orjson.loads(data)
        items = sorted(answer["data"], key=lambda item: item["index"])
        vectors = [[float(value) for value in item["embedding"]] for item in items]
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        raise EmbeddingsFailed("the embeddings endpoint's answer is not an embeddings list") from None
    if len(vectors) != count or any(len(vector) != dimensions for vector in vectors):
        raise EmbeddingsFailed(f"the embeddings endpoint did not answer {count} vectors of {dimensions} dimensions")
    return [_normalised(vector) for vector in vectors]


def _normalised(vector: list[float]) -> list[float]:
    norm = math.sqrt(math.fsum(value * value for value in vector))
    if not math.isfinite(norm):
        raise EmbeddingsFailed("the embeddings endpoint answered a vector that is not finite")
    return [value / norm for value in vector] if norm else vector
