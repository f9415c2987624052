"""The Ollama protocol (spec §4.13): ``GET /api/tags`` probe, ``POST /api/embed`` in batches.

Request body ``{model, input: [texts...], keep_alive, dimensions?}``; the response's
``embeddings`` holds one vector per input, in order. Transport, time-outs and error mapping live
in :class:`mnemon.embed.HTTPEmbedder`. Imports only ``mnemon.embed`` and ``mnemon.errors``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from mnemon.embed import (
    CONNECT_TIMEOUT_S,
    DEFAULT_BATCH_SIZE,
    DEFAULT_KEEP_ALIVE,
    PROBE_TIMEOUT_S,
    TIMEOUT_S,
    HTTPEmbedder,
)
from mnemon.errors import EmbedderResponseError

if TYPE_CHECKING:
    import httpx

__all__ = ["OllamaEmbedder"]

_SECONDS = re.compile(r"-?\d+")


class OllamaEmbedder(HTTPEmbedder):
    """Embed through an Ollama server at ``endpoint`` (e.g. ``http://localhost:11434``).

    ``keep_alive`` (default ``"30m"``) keeps the model loaded between mnemon invocations; an empty
    string leaves it to the server. A bare integer such as ``"-1"`` or ``"300"`` is sent as a
    number of seconds, because Ollama parses strings as Go durations and would reject it.
    """

    protocol = "ollama"

    def __init__(
        self,
        *,
        endpoint: str,
        model: str,
        keep_alive: str = DEFAULT_KEEP_ALIVE,
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
        self.keep_alive = keep_alive

    def _probe_path(self) -> str:
        return "api/tags"

    def _embed_path(self) -> str:
        return "api/embed"

    def _request_body(self, texts: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "input": texts}
        keep_alive = self.keep_alive.strip()
        if keep_alive:
            body["keep_alive"] = int(keep_alive) if _SECONDS.fullmatch(keep_alive) else keep_alive
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        return body

    def _vectors_from(self, payload: Any, count: int) -> object:
        if not isinstance(payload, dict) or "embeddings" not in payload:
            raise EmbedderResponseError(f'{self._source()} returned no "embeddings" field')
        return payload["embeddings"]
