"""A real embedding server on 127.0.0.1 for tests and benchmarks: Ollama and OpenAI APIs, with faults.

Vectors come from :class:`mnemon.embed.fake.HashEmbedder`, so a test can predict them exactly:
``EmbedServer(dim=64).expected(["text"])`` equals what a client receives (floats round-trip through
JSON unchanged), and texts sharing words have high cosines. A request with ``dimensions: k`` gets
``HashEmbedder(dim=k)`` vectors (a Matryoshka-style prefix, re-normalised).

In-process use (pytest)::

    from embed_server import EmbedServer

    with EmbedServer(dim=64) as server:            # port 0: a free port is picked
        server.url                                 # "http://127.0.0.1:<port>"       (Ollama base)
        server.openai_url                          # "http://127.0.0.1:<port>/v1"    (OpenAI base)
        server.mode = "nan"                        # switch faults at any time
        server.requests                            # [RecordedRequest(method, path, headers, body, raw)]
        server.embed_requests                      # only POSTs to /api/embed and /v1/embeddings
        server.clear()                             # forget recorded requests

Routes: ``GET /api/tags``, ``POST /api/embed`` (Ollama; ``input`` a string or a list), ``GET
/v1/models``, ``POST /v1/embeddings`` (OpenAI; ``data[i] = {object, index, embedding}``). Anything
else is 404. Header names in ``RecordedRequest.headers`` are lower-case; ``body`` is the parsed JSON
(``None`` when absent or invalid). At most 10 000 requests are kept.

Constructor options: ``dim`` (64), ``mode`` ("ok"), ``models`` (None = accept any model name;
otherwise other names get a 404 like Ollama's "model not found"), ``api_key`` (None; when set,
``/v1/*`` requests without ``Authorization: Bearer <key>`` get 401), ``stall_seconds`` (5.0),
``delay`` (0.0 s added before every response, e.g. to benchmark latency), ``host``, ``port``.

Modes (``MODES``); probes (``/api/tags``, ``/v1/models``) are affected only by ``stall`` and
``unavailable``:

    ok            correct vectors
    wrong_dim     vectors one longer than requested (``dimensions``) or than ``dim``
    nan           the first value of every vector is NaN (JSON ``NaN``)
    null          every embedding is ``null``
    null_values   the first value of every vector is ``null``
    empty         no embeddings at all (``"embeddings": []`` / ``"data": []``)
    empty_vector  every embedding is ``[]``
    zeros         every vector is all zeros
    wrong_count   one embedding more than there were inputs
    ragged        every second vector is one value short (one input: the vector nests a list)
    malformed     status 200 with a truncated JSON body
    not_found     404 with the server's "model not found" error body
    error500      500 with an error body
    unavailable   503 on every route, probes included
    stall         every route waits ``stall_seconds`` before answering (a client time-out test)
    trickle       correct answers whose body is sent in 10 pieces spread over ``stall_seconds``
                  (each read is quick, the whole response is slow: tests an overall deadline)
    too_long      400 "input length exceeds the context length" for a request holding any input
                  over ``TOO_LONG_CHARS`` characters, correct vectors otherwise (one bad memory)

Subprocess use (for CLI tests and benchmarks that run mnemon in another process)::

    python tests/embed_server.py --port 0 --dim 768 [--mode ok] [--api-key K] [--model NAME ...]
                                 [--stall-seconds S] [--delay S]

prints its Ollama base URL on the first line of stdout and serves until SIGTERM/SIGINT. From
Python, :class:`EmbedServerProcess` does this for you (``.url``, ``.openai_url``, ``.set_mode()``,
``.requests()``, ``.clear()``, ``.close()``), talking to the control routes ``POST /_control/mode``
(body ``{"mode": ...}``), ``POST /_control/clear`` and ``GET /_control/requests`` (JSON list of
``{method, path, headers, body}``); control requests are not recorded.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mnemon.embed.fake import HashEmbedder

__all__ = ["MODES", "EmbedServer", "EmbedServerProcess", "RecordedRequest", "main"]

MODES: tuple[str, ...] = (
    "ok",
    "wrong_dim",
    "nan",
    "null",
    "null_values",
    "empty",
    "empty_vector",
    "zeros",
    "wrong_count",
    "ragged",
    "malformed",
    "not_found",
    "error500",
    "unavailable",
    "stall",
    "trickle",
    "too_long",
)
TOO_LONG_CHARS = 1000  # mode "too_long": a longer input exceeds the model's context
_MAX_RECORDED = 10_000


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received (control routes excluded)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes


class EmbedServer:
    """A threaded HTTP server speaking the Ollama and OpenAI embedding APIs; see the module doc."""

    def __init__(
        self,
        dim: int = 64,
        mode: str = "ok",
        *,
        models: tuple[str, ...] | list[str] | None = None,
        api_key: str | None = None,
        stall_seconds: float = 5.0,
        delay: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.dim = dim
        self.mode = mode
        self.models = tuple(models) if models else None
        self.api_key = api_key
        self.stall_seconds = stall_seconds
        self.delay = delay
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._requests: deque[RecordedRequest] = deque(maxlen=_MAX_RECORDED)
        self._embedders: dict[int, HashEmbedder] = {}
        self._httpd = ThreadingHTTPServer((host, port), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.owner = self  # type: ignore[attr-defined]
        self._httpd.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    # -- public API --

    @property
    def mode(self) -> str:
        return self._mode

    @mode.setter
    def mode(self, value: str) -> None:
        if value not in MODES:
            raise ValueError(f"unknown mode {value!r}; valid: {', '.join(MODES)}")
        self._mode = value

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """The Ollama base URL, ``http://127.0.0.1:<port>``."""
        host = self._httpd.server_address[0]
        assert isinstance(host, str)
        return f"http://{host}:{self.port}"

    @property
    def openai_url(self) -> str:
        """The OpenAI-compatible base URL, ``<url>/v1``."""
        return f"{self.url}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        """The requests received so far, oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def embed_requests(self) -> list[RecordedRequest]:
        """Only the embedding POSTs (``/api/embed`` and ``/v1/embeddings``)."""
        return [r for r in self.requests if r.path in ("/api/embed", "/v1/embeddings")]

    def clear(self) -> None:
        """Forget the recorded requests."""
        with self._lock:
            self._requests.clear()

    def expected(self, texts: list[str], dimensions: int | None = None) -> Any:
        """Return the float64 (n, d) vectors mode "ok" serves for ``texts``."""
        return self._embedder(dimensions or self.dim).embed_batch(texts)

    def close(self) -> None:
        """Stop serving, release stalled handlers and close the listening socket (idempotent)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> EmbedServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- used by the handler --

    def _embedder(self, dim: int) -> HashEmbedder:
        with self._lock:
            if dim not in self._embedders:
                self._embedders[dim] = HashEmbedder(dim=dim)
            return self._embedders[dim]

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _respond(self, method: str, path: str, headers: dict[str, str], body: Any) -> tuple[int, bytes]:
        """Return (status, body bytes) for one request under the current mode."""
        mode = self.mode
        if self.delay:
            self._stop.wait(self.delay)
        if mode == "stall":
            self._stop.wait(self.stall_seconds)
        if mode == "unavailable":
            return 503, _dumps({"error": "service unavailable"})
        openai = path.startswith("/v1/")
        if openai and self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
            return 401, _dumps({"error": {"message": "invalid api key", "type": "invalid_request_error"}})
        if (method, path) == ("GET", "/api/tags"):
            names = self.models or ("nomic-embed-text:latest",)
            return 200, _dumps({"models": [{"name": n, "model": n} for n in names]})
        if (method, path) == ("GET", "/v1/models"):
            names = self.models or ("nomic-embed-text",)
            return 200, _dumps({"object": "list", "data": [{"id": n, "object": "model"} for n in names]})
        if (method, path) not in (("POST", "/api/embed"), ("POST", "/v1/embeddings")):
            return 404, _dumps({"error": "not found"})
        return self._embed(mode, openai, body)

    def _embed(self, mode: str, openai: bool, body: Any) -> tuple[int, bytes]:
        if not isinstance(body, dict) or "input" not in body:
            return 400, _dumps({"error": "invalid request body"})
        model = body.get("model")
        texts = body["input"]
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return 400, _dumps({"error": "input must be a string or a list of strings"})
        if mode == "not_found" or (self.models is not None and model not in self.models):
            message = f'model "{model}" not found, try pulling it first'
            if openai:
                return 404, _dumps({"error": {"message": message, "code": "model_not_found"}})
            return 404, _dumps({"error": message})
        if mode == "error500":
            return 500, _dumps({"error": "internal server error"})
        if mode == "malformed":
            return 200, b'{"embeddings": [[0.1, 0.2, '
        if mode == "too_long" and any(len(t) > TOO_LONG_CHARS for t in texts):
            return 400, _dumps({"error": "input length exceeds the context length"})
        dimensions = body.get("dimensions")
        dim = dimensions if isinstance(dimensions, int) and dimensions > 0 else self.dim
        vectors: list[Any] = self._embedder(dim + (mode == "wrong_dim")).embed_batch(texts).tolist()
        if mode == "nan":
            for v in vectors:
                v[0] = float("nan")
        elif mode == "null":
            vectors = [None] * len(vectors)
        elif mode == "null_values":
            for v in vectors:
                v[0] = None
        elif mode == "empty":
            vectors = []
        elif mode == "empty_vector":
            vectors = [[] for _ in vectors]
        elif mode == "zeros":
            vectors = [[0.0] * len(v) for v in vectors]
        elif mode == "wrong_count":
            vectors.append(vectors[-1] if vectors else [1.0] * dim)
        elif mode == "ragged":
            if len(vectors) == 1:
                vectors[0][0] = [vectors[0][0]]
            for v in vectors[1::2]:
                v.pop()
        if openai:
            data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
            return 200, _dumps({"object": "list", "data": data, "model": model})
        return 200, _dumps({"model": model, "embeddings": vectors})


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like the real servers
    timeout = 60  # an idle kept-alive connection releases its thread after a minute

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in two writes; without this, Nagle + delayed ACK add ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _handle(self, method: str) -> None:
        owner: EmbedServer = self.server.owner  # type: ignore[attr-defined]
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        path = self.path.split("?", 1)[0]
        if path.startswith("/_control/"):
            status, payload = _control(owner, method, path, body)
        else:
            headers = {k.lower(): v for k, v in self.headers.items()}
            owner._record(RecordedRequest(method, path, headers, body, raw))
            status, payload = owner._respond(method, path, headers, body)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if owner.mode != "trickle" or path.startswith("/_control/"):
            self.wfile.write(payload)
            return
        step = max(1, -(-len(payload) // 10))
        for start in range(0, len(payload), step):
            self.wfile.write(payload[start : start + step])
            self.wfile.flush()
            if owner._stop.wait(owner.stall_seconds / 10):
                return


def _control(owner: EmbedServer, method: str, path: str, body: Any) -> tuple[int, bytes]:
    if (method, path) == ("POST", "/_control/mode"):
        try:
            owner.mode = body["mode"]
        except (TypeError, KeyError, ValueError) as e:
            return 400, _dumps({"error": str(e)})
        return 200, _dumps({"mode": owner.mode})
    if (method, path) == ("POST", "/_control/clear"):
        owner.clear()
        return 200, _dumps({})
    if (method, path) == ("GET", "/_control/requests"):
        rows = [{"method": r.method, "path": r.path, "headers": r.headers, "body": r.body} for r in owner.requests]
        return 200, _dumps(rows)
    return 404, _dumps({"error": "not found"})


def _dumps(payload: Any) -> bytes:
    return json.dumps(payload).encode("utf-8")  # allow_nan: the "nan" mode needs a JSON NaN


class EmbedServerProcess:
    """Run ``tests/embed_server.py`` as a subprocess; a context manager like :class:`EmbedServer`."""

    def __init__(self, dim: int = 64, mode: str = "ok", *, extra_args: list[str] | None = None) -> None:
        argv = [sys.executable, str(Path(__file__).resolve()), "--port", "0", "--dim", str(dim)]
        argv += ["--mode", mode, *(extra_args or [])]
        self._process = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        assert self._process.stdout is not None
        line = self._process.stdout.readline().strip()
        if not line.startswith("http://"):
            self.close()
            raise RuntimeError(f"embed server did not start (got {line!r})")
        self.url = line
        self.openai_url = f"{line}/v1"

    def set_mode(self, mode: str) -> None:
        self._call("POST", "/_control/mode", {"mode": mode})

    def clear(self) -> None:
        self._call("POST", "/_control/clear", {})

    def requests(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._call("GET", "/_control/requests", None)
        return result

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()

    def __enter__(self) -> EmbedServerProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _call(self, method: str, path: str, body: Any) -> Any:
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy
        with opener.open(request, timeout=5) as response:
            return json.loads(response.read())


def main(argv: list[str] | None = None) -> int:
    """Serve until SIGTERM or SIGINT; print the Ollama base URL first."""
    parser = argparse.ArgumentParser(description="Fake Ollama/OpenAI embedding server for mnemon tests.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--mode", default="ok", choices=MODES)
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--model", action="append", dest="models", help="accepted model (repeatable)")
    parser.add_argument("--stall-seconds", type=float, default=5.0)
    parser.add_argument("--delay", type=float, default=0.0)
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with EmbedServer(
        dim=args.dim,
        mode=args.mode,
        models=args.models,
        api_key=args.api_key,
        stall_seconds=args.stall_seconds,
        delay=args.delay,
        host=args.host,
        port=args.port,
    ) as server:
        print(server.url, flush=True)
        while not stop.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
