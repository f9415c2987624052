"""The OpenAI-compatible protocol (spec §4.13 [Δ newest], issue #117).

``GET <endpoint>/models`` probes; ``POST <endpoint>/embeddings`` with ``{model, input: [texts...],
dimensions?}`` returns ``data[i].embedding``, ordered by ``data[i].index`` when the server gives
indices. ``Authorization: Bearer <key>`` is sent on every request when a key is set. The endpoint is
the API base, usually ending in ``/v1`` (``/v1`` and ``/v1/`` are equivalent). Transport, time-outs
and error mapping live in :class:`mnemon.embed.HTTPEmbedder`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mnemon.embed import (
    CONNECT_TIMEOUT_S,
    DEFAULT_BATCH_SIZE,
    PROBE_TIMEOUT_S,
    TIMEOUT_S,
    HTTPEmbedder,
)
from mnemon.errors import EmbedderResponseError

if TYPE_CHECKING:
    import httpx

__all__ = ["OpenAIEmbedder"]


class OpenAIEmbedder(HTTPEmbedder):
    """Embed through an OpenAI-compatible server (OpenAI, SiliconFlow, vLLM, LM Studio, ...)."""

    protocol = "openai"

    def __init__(
        self,
        *,
        endpoint: str,
        model: str,
        api_key: str | None = None,
        dimensions: int | None = None,
        timeout: float = TIMEOUT_S,
        connect_timeout: float = CONNECT_TIMEOUT_S,
        probe_timeout: float = PROBE_TIMEOUT_S,
        batch_size: int = DEFAULT_BATCH_SIZE,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(
            endpoint=endpoint,
            model=model,
            dimensions=dimensions,
            timeout=timeout,
            connect_timeout=connect_timeout,
            probe_timeout=probe_timeout,
            batch_size=batch_size,
            transport=transport,
        )
        self.api_key = api_key or None

    def __repr__(self) -> str:  # never show the key
        return f"OpenAIEmbedder(endpoint={self.endpoint!r}, model={self.model!r})"

    def _probe_path(self) -> str:
        return "models"

    def _embed_path(self) -> str:
        return "embeddings"

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def _request_body(self, texts: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "input": texts}
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        return body

    def _vectors_from(self, payload: Any, count: int) -> object:
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
            raise EmbedderResponseError(f'{self._source()} returned no "data" list')
        indices = [item.get("index") for item in data]
        if all(type(i) is int for i in indices):
            if sorted(indices) != list(range(len(data))):
                raise EmbedderResponseError(f"{self._source()} returned inconsistent embedding indices")
            data = sorted(data, key=lambda item: item["index"])
        return [item.get("embedding") for item in data]
