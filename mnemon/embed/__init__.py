"""The embedding client: one small protocol over Ollama, OpenAI-compatible servers and a fake.

Implements spec §4.13 (and §3.3 step 2, §3.14): a 2 s availability probe, batched embedding
requests, float64 vectors (Decision 3), and translation of every httpx failure into
``EmbedderUnavailable`` (transient: connect error, time-out) or ``EmbedderResponseError``
(permanent: bad status, bad JSON, unusable vectors), always chained with ``from``.

This package is the only importer of httpx. ``import mnemon.embed`` stays cheap: httpx and numpy
are imported inside functions, and the protocol modules only when :func:`make_embedder` needs one,
because the CLI imports this module before it knows whether it will embed anything. Nothing here
reads the environment or touches the network in a constructor; ``config.py`` resolves the settings
and the engine decides when to probe. Imports only ``mnemon.errors`` from the project.
"""

from __future__ import annotations

import json
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

from mnemon.embed.closing import ClosingContext
from mnemon.errors import EmbedderError, EmbedderResponseError, EmbedderUnavailable

if TYPE_CHECKING:
    import http.client

    import httpx
    import numpy as np
    from numpy.typing import NDArray

__all__ = [
    "CONNECT_TIMEOUT_S",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_KEEP_ALIVE",
    "DEFAULT_MODEL",
    "PROBE_TIMEOUT_S",
    "PROTOCOLS",
    "TIMEOUT_S",
    "Embedder",
    "describe_unavailable",
    "make_embedder",
    "resolve_protocol",
]

# --- §4.13 / §3.2 constants ------------------------------------------------------------------

DEFAULT_MODEL = "nomic-embed-text"  # §3.1, 768 dims
DEFAULT_KEEP_ALIVE = "30m"  # §3.2 MNEMON_EMBED_KEEP_ALIVE
PROBE_TIMEOUT_S = 2.0  # §3.3 step 2: availability within 2 s
TIMEOUT_S = 30.0  # §4.13: 30 s total
CONNECT_TIMEOUT_S = 5.0  # §4.13: 5 s dial
DEFAULT_BATCH_SIZE = 64  # texts per HTTP request; larger inputs are split (ours, not the Go tool's)
FIRST_ANSWER_SHARE = 0.25  # probe_embed: share of the probe budget spent waiting for the embed answer
MAX_RESPONSE_BYTES = 64 * 1024 * 1024  # a misbehaving server cannot make us buffer without bound
PROTOCOLS: tuple[str, ...] = ("ollama", "openai", "local")  # what MNEMON_EMBED_PROTOCOL may name, besides "auto"


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns texts into float64 vectors.

    ``protocol`` is ``"ollama"``, ``"openai"`` or ``"fake"``; ``endpoint`` is the base URL as
    configured (used in messages). ``embed_batch`` returns a C-contiguous float64 array of shape
    (n, d) whose rows are finite and non-zero, or raises an ``EmbedderError``.
    """

    model: str
    protocol: str
    endpoint: str

    def probe(self) -> bool: ...

    def embed_batch(self, texts: list[str]) -> NDArray[np.float64]: ...

    def embed(self, text: str) -> NDArray[np.float64]: ...

    def close(self) -> None: ...

    def __enter__(self) -> Embedder: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


def resolve_protocol(endpoint: str, protocol: str) -> str:
    """Return ``"ollama"``, ``"openai"`` or ``"local"``; ``"auto"`` (or empty) picks ollama or openai
    by the endpoint URL (§3.2); ``local`` is only ever chosen explicitly (Decision 19).

    Auto means openai when the URL's path ends in ``/v1`` (a trailing slash does not matter),
    otherwise ollama. An unknown protocol is a programming error here: ``config.py`` has already
    warned and fallen back to auto.
    """
    name = protocol.strip().lower()
    if name in PROTOCOLS:
        return name
    if name not in ("", "auto"):
        raise ValueError(f"unknown embedding protocol {protocol!r}; valid: ollama, openai, local, auto")
    path = urlsplit(endpoint.strip()).path.rstrip("/")
    return "openai" if path.endswith("/v1") else "ollama"


def describe_unavailable(embedder: Embedder) -> str:
    """Return the contract's "provider not available" message for this embedder (§3.14)."""
    if embedder.protocol == "local":  # names the model directory and why it cannot be loaded
        return getattr(embedder, "problem", "") or f"local embedding model not available at {embedder.endpoint}"
    if embedder.protocol == "openai":
        return f"OpenAI-compatible embedding provider not available at {embedder.endpoint}"
    return f"Ollama embedding provider not available at {embedder.endpoint}"


def make_embedder(
    *,
    endpoint: str,
    model: str,
    protocol: str,
    api_key: str | None,
    keep_alive: str,
    dimensions: int | None,
    timeout: float = TIMEOUT_S,
    connect_timeout: float = CONNECT_TIMEOUT_S,
    probe_timeout: float = PROBE_TIMEOUT_S,
    batch_size: int = DEFAULT_BATCH_SIZE,
    transport: httpx.BaseTransport | None = None,
    model_dir: str | None = None,
) -> Embedder:
    """Build the embedder for resolved settings; no network I/O (and no model load) happens here.

    ``protocol`` is ``"ollama"``, ``"openai"`` or ``"auto"`` (see :func:`resolve_protocol`).
    ``api_key`` is sent as a bearer token by the openai protocol only; ``keep_alive`` is sent by
    the ollama protocol only. ``transport`` lets tests inject an ``httpx.MockTransport``.
    ``local`` runs the model in ``model_dir`` in this process (``mnemon.embed.local``).
    """
    if protocol.strip().lower() == "local":
        from mnemon.embed.local import LocalEmbedder

        if model_dir is None:
            raise ValueError("the local protocol needs a model directory")
        return LocalEmbedder(model=model, model_dir=model_dir)
    common: dict[str, Any] = dict(
        endpoint=endpoint,
        model=model,
        dimensions=dimensions,
        timeout=timeout,
        connect_timeout=connect_timeout,
        probe_timeout=probe_timeout,
        batch_size=batch_size,
        transport=transport,
    )
    if resolve_protocol(endpoint, protocol) == "openai":
        from mnemon.embed.openai import OpenAIEmbedder

        return OpenAIEmbedder(api_key=api_key, **common)
    from mnemon.embed.ollama import OllamaEmbedder

    return OllamaEmbedder(keep_alive=keep_alive, **common)


# --- shared by the HTTP protocols (ollama.py, openai.py) -------------------------------------


def join_url(endpoint: str, path: str) -> str:
    """Join path-wise: ``http://h:1/`` + ``api/tags`` == ``http://h:1`` + ``/api/tags``."""
    return endpoint.strip().rstrip("/") + "/" + path.lstrip("/")


def to_matrix(vectors: object, *, count: int, dimensions: int | None, source: str) -> NDArray[np.float64]:
    """Validate decoded JSON vectors and return them as a float64 (count, d) array.

    Raises ``EmbedderResponseError`` for a non-list, a wrong count, empty, ragged, non-numeric,
    non-finite or all-zero vectors, and a length other than ``dimensions`` when one was requested.
    A zero vector has no direction, so it could only ever score cosine 0 (or NaN): it is refused
    here rather than stored. ``source`` names the server in messages.
    """
    import numpy as np

    if not isinstance(vectors, list):
        raise EmbedderResponseError(f"{source} returned no list of embeddings")
    if not all(isinstance(v, list) for v in vectors):
        raise EmbedderResponseError(f"{source} returned a missing or non-list embedding")
    if len(vectors) != count:
        raise EmbedderResponseError(f"{source} returned {len(vectors)} embeddings for {count} inputs")
    lengths = {len(v) for v in vectors}
    if len(lengths) > 1:
        raise EmbedderResponseError(f"{source} returned embeddings of different lengths")
    if 0 in lengths:
        raise EmbedderResponseError(f"{source} returned an empty embedding")
    try:
        raw = np.array(vectors)
    except (ValueError, TypeError, OverflowError) as e:
        raise EmbedderResponseError(f"{source} returned a malformed embedding") from e
    # None gives dtype object, strings dtype str, huge ints object: only ints and floats pass.
    if raw.ndim != 2 or raw.dtype.kind not in "iuf":
        raise EmbedderResponseError(f"{source} returned a non-numeric embedding")
    matrix = np.ascontiguousarray(raw, dtype=np.float64)
    if not np.isfinite(matrix).all():
        raise EmbedderResponseError(f"{source} returned a non-finite embedding (NaN or infinity)")
    if (matrix == 0.0).all(axis=1).any():
        raise EmbedderResponseError(f"{source} returned an all-zero embedding")
    if dimensions is not None and matrix.shape[1] != dimensions:
        raise EmbedderResponseError(
            f"{source} returned {matrix.shape[1]}-dimensional embeddings, {dimensions} were requested"
        )
    return matrix


class HTTPEmbedder(ClosingContext):
    """Shared machinery of the HTTP protocols: one lazy ``httpx.Client``, time-outs, error mapping.

    Subclasses set ``protocol`` and implement ``_probe_path``, ``_headers``, ``_embed_path``,
    ``_request_body`` and ``_vectors_from``. The client ignores proxy variables
    (``trust_env=False``, §4.13) and is created on first use, never in the constructor.
    """

    protocol = "http"

    def __init__(
        self,
        *,
        endpoint: str,
        model: str,
        dimensions: int | None = None,
        timeout: float = TIMEOUT_S,
        connect_timeout: float = CONNECT_TIMEOUT_S,
        probe_timeout: float = PROBE_TIMEOUT_S,
        batch_size: int = DEFAULT_BATCH_SIZE,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if dimensions is not None and (isinstance(dimensions, bool) or dimensions < 1):
            raise ValueError(f"dimensions must be a positive integer or None, got {dimensions!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.endpoint = endpoint
        self.model = model
        self.dimensions = dimensions
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.probe_timeout = probe_timeout
        self.batch_size = batch_size
        self._transport = transport
        self._client: httpx.Client | None = None
        self._conn: http.client.HTTPConnection | None = None  # the plain-http path (_send_plain)

    # -- subclass hooks --

    def _probe_path(self) -> str:
        raise NotImplementedError

    def _embed_path(self) -> str:
        raise NotImplementedError

    def _headers(self) -> dict[str, str]:
        return {}

    def _request_body(self, texts: list[str]) -> dict[str, Any]:
        raise NotImplementedError

    def _vectors_from(self, payload: Any, count: int) -> object:
        raise NotImplementedError

    # -- public API --

    def probe(self) -> bool:
        """Return True when the server answers the availability request with 200 in time."""
        try:
            status, _ = self._send("GET", self._probe_path(), None, self.probe_timeout)
        except EmbedderError:  # a probe answers yes or no, it never raises
            return False
        return status == 200

    def embed_batch(self, texts: list[str]) -> NDArray[np.float64]:
        """Embed ``texts`` in batches of ``batch_size``; return a float64 (len(texts), d) array."""
        import numpy as np

        if not texts:
            return np.empty((0, self.dimensions or 0), dtype=np.float64)
        parts: list[NDArray[np.float64]] = []
        for start in range(0, len(texts), self.batch_size):
            chunk = list(texts[start : start + self.batch_size])
            parts.append(self._embed_chunk(chunk))
        if len({p.shape[1] for p in parts}) > 1:
            raise EmbedderResponseError(f"{self._source()} changed the embedding length between batches")
        if len(parts) == 1:
            return parts[0]
        matrix: NDArray[np.float64] = np.concatenate(parts, axis=0)
        return matrix

    def embed(self, text: str) -> NDArray[np.float64]:
        """Embed one text; return a float64 (d,) vector."""
        vector: NDArray[np.float64] = self.embed_batch([text])[0]
        return vector

    def probe_embed(self, text: str) -> NDArray[np.float64]:
        """Embed ``text`` as the first request, letting it stand in for the availability probe.

        Raises ``EmbedderUnavailable`` when the 2 s probe would have said no: the connection
        fails, or the server is silent for a quarter of ``probe_timeout`` *and* a real probe
        does not answer 200 within the rest of it (a model that loads slowly still gets the
        full request time-out once the probe answers). A healthy server thus costs one request instead of two. Errors after the
        server answered (bad status, bad vectors) raise ``EmbedderResponseError``; whether the
        server counts as available then is the probe's call (see ``EngineBase.embed_text``).
        """
        if not self._plain_http():  # httpx path: the probe, then the request
            if not self.probe():
                raise EmbedderUnavailable(describe_unavailable(self))
            return self.embed(text)
        matrix = self._embed_chunk([text], first_answer=self.probe_timeout)
        if matrix.shape[0] != 1:  # pragma: no cover - to_matrix checked the count
            raise EmbedderResponseError(f"{self._source()} returned {matrix.shape[0]} embeddings for 1 input")
        vector: NDArray[np.float64] = matrix[0]
        return vector

    def close(self) -> None:
        """Close the connection (idempotent; a later call opens a new one)."""
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None


    def __repr__(self) -> str:
        return f"{type(self).__name__}(endpoint={self.endpoint!r}, model={self.model!r})"

    # -- internals --

    def _source(self) -> str:
        return f"embedding server at {self.endpoint}"

    def _embed_chunk(self, texts: list[str], first_answer: float | None = None) -> NDArray[np.float64]:
        status, body = self._send("POST", self._embed_path(), self._request_body(texts), self.timeout, first_answer)
        if status != 200:
            raise EmbedderResponseError(f"{self._source()} returned HTTP {status}{_error_detail(body)}")
        try:
            payload = json.loads(body)
        except ValueError as e:  # JSONDecodeError and UnicodeDecodeError
            raise EmbedderResponseError(f"{self._source()} returned invalid JSON") from e
        vectors = self._vectors_from(payload, len(texts))
        return to_matrix(vectors, count=len(texts), dimensions=self.dimensions, source=self._source())

    def _http(self) -> httpx.Client:
        if self._client is None:
            import httpx

            # Plain-http endpoints never use TLS (no redirects are followed and every URL is
            # joined onto the endpoint), so skip loading the CA bundle: ~20 ms of CLI start-up.
            plain_http = self.endpoint.strip().lower().startswith("http://")
            self._client = httpx.Client(
                timeout=httpx.Timeout(self.timeout, connect=self.connect_timeout),
                trust_env=False,
                verify=not plain_http,
                follow_redirects=False,
                headers=self._headers(),
                transport=self._transport,
            )
        return self._client

    def _plain_http(self) -> bool:
        """True when requests go through the standard library (plain http, no injected transport)."""
        return self._transport is None and self.endpoint.strip().lower().startswith("http://")

    def _send(
        self, method: str, path: str, body: dict[str, Any] | None, limit: float, first_answer: float | None = None
    ) -> tuple[int, bytes]:
        """Send one request and read the whole response within ``limit`` seconds.

        httpx time-outs are per operation (connect, each read), so a server that trickles bytes
        is also held to an overall deadline, like Go's ``http.Client.Timeout``. Plain-http
        endpoints (a local Ollama, the usual case) skip httpx: importing it and building its
        client costs ~150 ms of a CLI run (httpcore loads trio, httpx its CLI), the standard
        library's ``http.client`` ~15 ms. ``first_answer`` (plain http only): see ``probe_embed``.
        """
        if self._plain_http():
            return self._send_plain(method, path, body, limit, first_answer)
        import httpx

        deadline = time.monotonic() + limit
        timeout = httpx.Timeout(limit, connect=min(limit, self.connect_timeout))
        url = join_url(self.endpoint, path)
        try:
            with self._http().stream(method, url, json=body, timeout=timeout) as response:
                chunks: list[bytes] = []
                size = 0
                for chunk in response.iter_bytes():
                    chunks.append(chunk)
                    size += len(chunk)
                    if size > MAX_RESPONSE_BYTES:
                        raise EmbedderResponseError(f"{self._source()} sent an oversized response")
                    if time.monotonic() > deadline:
                        raise EmbedderUnavailable(describe_unavailable(self)) from TimeoutError(
                            f"no complete response within {limit:g} s"
                        )
                return response.status_code, b"".join(chunks)
        except (httpx.TransportError, httpx.InvalidURL) as e:
            # Connect/read/write/pool time-outs, refused or reset connections, bad URLs and
            # protocol violations: the server is not usable right now.
            raise EmbedderUnavailable(describe_unavailable(self)) from e
        except httpx.HTTPError as e:  # anything else httpx may add: still the server's fault
            raise EmbedderResponseError(f"{self._source()} failed: {e}") from e

    def _send_plain(
        self, method: str, path: str, body: dict[str, Any] | None, limit: float, first_answer: float | None
    ) -> tuple[int, bytes]:
        """``_send`` over ``http.client``: same time-outs, limits, headers and error mapping.

        One kept-alive connection is reused; a reused connection the server has meanwhile
        closed is reopened once (nothing was answered on it, so the request is simply resent).
        With ``first_answer``, a server silent for that long is asked the availability probe
        on a second connection; if the probe fails the request is abandoned as unavailable.
        """
        import http.client
        import select

        started = time.monotonic()
        deadline = started + limit
        url = join_url(self.endpoint, path)
        try:
            parts = urlsplit(url)
            host, port = parts.hostname, parts.port or 80
            if not host:
                raise ValueError(f"no host in {url!r}")
        except ValueError as e:  # as httpx.InvalidURL: the server is not usable
            raise EmbedderUnavailable(describe_unavailable(self)) from e
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        headers = {"Accept": "*/*", "Connection": "keep-alive", "User-Agent": "mnemon", **self._headers()}
        payload = None
        if body is not None:  # encoded exactly as httpx's json= would
            payload = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
            headers["Content-Type"] = "application/json"
        for attempt in (0, 1):
            conn = self._conn
            if conn is None or (conn.host, conn.port) != (host, port):
                if conn is not None:
                    conn.close()
                conn = self._conn = http.client.HTTPConnection(host, port)
            reused = conn.sock is not None
            try:
                if conn.sock is None:
                    dial = min(limit, self.connect_timeout, deadline - time.monotonic())
                    if first_answer is not None:  # connecting is part of the availability probe
                        dial = min(dial, first_answer)
                    conn.timeout = max(0.001, dial)
                    conn.connect()
                sock = conn.sock
                sock.settimeout(max(0.001, deadline - time.monotonic()))
                conn.request(method, target, body=payload, headers=headers)
                if first_answer is not None:
                    # The availability decision keeps its 2 s budget: a quarter waiting for the
                    # answer itself, then the probe gets what is left of it.
                    probe_by = started + first_answer
                    wait = max(0.0, min(first_answer * FIRST_ANSWER_SHARE, deadline - time.monotonic()))
                    if not select.select([sock], [], [], wait)[0] and not self._probe_elsewhere(probe_by):
                        raise EmbedderUnavailable(describe_unavailable(self)) from TimeoutError(
                            f"no answer within {first_answer:g} s and the availability probe failed"
                        )
                sock.settimeout(max(0.001, deadline - time.monotonic()))
                response = conn.getresponse()
                chunks: list[bytes] = []
                size = 0
                while True:
                    if sock.fileno() >= 0:
                        sock.settimeout(max(0.001, deadline - time.monotonic()))
                    chunk = response.read1(65536)
                    if not chunk:
                        break
                    chunks.append(chunk)
                    size += len(chunk)
                    if size > MAX_RESPONSE_BYTES:
                        raise EmbedderResponseError(f"{self._source()} sent an oversized response")
                    if time.monotonic() > deadline:
                        raise EmbedderUnavailable(describe_unavailable(self)) from TimeoutError(
                            f"no complete response within {limit:g} s"
                        )
                response.close()  # read to the end: the connection is free for the next request
                if response.will_close:
                    conn.close()
                return response.status, b"".join(chunks)
            except EmbedderError:
                conn.close()
                raise
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as e:
                conn.close()
                if reused and attempt == 0 and time.monotonic() < deadline:
                    continue  # the server closed an idle kept-alive connection: reopen once
                raise EmbedderUnavailable(describe_unavailable(self)) from e
            except (OSError, http.client.HTTPException, ValueError) as e:
                # Time-outs, refused or reset connections, bad hosts, protocol violations.
                conn.close()
                raise EmbedderUnavailable(describe_unavailable(self)) from e
        raise AssertionError("unreachable")  # pragma: no cover

    def _probe_elsewhere(self, by: float) -> bool:
        """The availability probe on its own connection, answered before ``by`` (monotonic)."""
        saved, self._conn = self._conn, None
        try:
            remaining = by - time.monotonic()
            if remaining <= 0:
                return False
            status, _ = self._send("GET", self._probe_path(), None, remaining)
            return status == 200
        except EmbedderError:
            return False
        finally:
            if self._conn is not None:
                self._conn.close()
            self._conn = saved


def _error_detail(body: bytes) -> str:
    """Return ``": <message>"`` from an error body (Ollama/OpenAI shapes), or ``""``."""
    try:
        payload = json.loads(body)
    except ValueError:
        return ""
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict):  # OpenAI: {"error": {"message": ...}}
        error = error.get("message")
    return f": {error}" if isinstance(error, str) and error else ""
