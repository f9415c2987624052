"""The embedding client against a real local HTTP server speaking the Ollama API (spec §4.13).

Also covers what the protocols share: the factory, auto protocol resolution, URL joining, error
mapping and the lazy-import rule. The OpenAI specifics are in test_embed_openai.py.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
from embed_server import MODES, TOO_LONG_CHARS, EmbedServer, EmbedServerProcess

from mnemon.embed import (
    Embedder,
    describe_unavailable,
    join_url,
    make_embedder,
    resolve_protocol,
)
from mnemon.embed.ollama import OllamaEmbedder
from mnemon.errors import EmbedderError, EmbedderResponseError, EmbedderUnavailable

SHORT = 0.3  # seconds: client time-out used against the stalling server


@pytest.fixture(scope="module")
def module_server() -> Iterator[EmbedServer]:
    with EmbedServer(dim=32, stall_seconds=1.5) as server:
        yield server


@pytest.fixture
def server(module_server: EmbedServer) -> EmbedServer:
    module_server.mode = "ok"
    module_server.clear()
    return module_server


def ollama(endpoint: str, **kwargs: object) -> OllamaEmbedder:
    options: dict[str, object] = dict(
        endpoint=endpoint,
        model="nomic-embed-text",
        protocol="ollama",
        api_key=None,
        keep_alive="30m",
        dimensions=None,
    )
    options.update(kwargs)
    embedder = make_embedder(**options)  # type: ignore[arg-type]
    assert isinstance(embedder, OllamaEmbedder)
    return embedder


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- probe ------------------------------------------------------------------------------------


def test_probe_true_when_server_answers_tags(server: EmbedServer) -> None:
    with ollama(server.url) as embedder:
        assert embedder.probe() is True
    assert [(r.method, r.path) for r in server.requests] == [("GET", "/api/tags")]


def test_probe_false_on_connection_refused() -> None:
    with ollama(f"http://127.0.0.1:{closed_port()}") as embedder:
        assert embedder.probe() is False


def test_probe_false_when_server_stalls_past_probe_timeout(server: EmbedServer) -> None:
    server.mode = "stall"
    with ollama(server.url, probe_timeout=SHORT) as embedder:
        started = time.monotonic()
        assert embedder.probe() is False
        assert time.monotonic() - started < 1.0


def test_probe_false_on_error_status(server: EmbedServer) -> None:
    server.mode = "unavailable"
    with ollama(server.url) as embedder:
        assert embedder.probe() is False


def test_probe_true_when_model_missing_because_tags_still_answers(server: EmbedServer) -> None:
    server.mode = "not_found"
    with ollama(server.url) as embedder:
        assert embedder.probe() is True
        with pytest.raises(EmbedderResponseError, match='model "nomic-embed-text" not found'):
            embedder.embed("x")


def test_probe_false_on_unusable_url() -> None:
    with ollama("localhost:11434") as embedder:  # no scheme
        assert embedder.probe() is False
        with pytest.raises(EmbedderUnavailable):
            embedder.embed("x")


# --- embedding --------------------------------------------------------------------------------


def test_embed_single_returns_the_servers_vector(server: EmbedServer) -> None:
    with ollama(server.url) as embedder:
        vector = embedder.embed("the cat sat on the mat")
    assert vector.shape == (32,)
    assert vector.dtype == np.float64
    np.testing.assert_array_equal(vector, server.expected(["the cat sat on the mat"])[0])


def test_embed_batch_returns_rows_in_input_order(server: EmbedServer) -> None:
    texts = ["alpha beta", "gamma", "delta epsilon zeta", "alpha beta"]
    with ollama(server.url) as embedder:
        matrix = embedder.embed_batch(texts)
    assert matrix.shape == (4, 32)
    assert matrix.dtype == np.float64 and matrix.flags.c_contiguous
    np.testing.assert_array_equal(matrix, server.expected(texts))
    assert np.isfinite(matrix).all()
    assert len(server.embed_requests) == 1


def test_similar_texts_have_high_cosine_through_the_server(server: EmbedServer) -> None:
    with ollama(server.url) as embedder:
        a, b, c = embedder.embed_batch(["project alpha uses postgres", "alpha uses postgres", "tea time"])
    assert a @ b > 0.6 > a @ c


def test_large_input_is_split_into_batches(server: EmbedServer) -> None:
    texts = [f"text number {i}" for i in range(5)]
    with ollama(server.url, batch_size=2) as embedder:
        matrix = embedder.embed_batch(texts)
    np.testing.assert_array_equal(matrix, server.expected(texts))
    assert [r.body["input"] for r in server.embed_requests] == [texts[0:2], texts[2:4], texts[4:5]]


def test_empty_batch_sends_nothing(server: EmbedServer) -> None:
    with ollama(server.url) as embedder:
        assert embedder.embed_batch([]).shape == (0, 0)
    with ollama(server.url, dimensions=8) as embedder:
        assert embedder.embed_batch([]).shape == (0, 8)
    assert server.requests == []


def test_request_body_has_model_input_list_and_keep_alive(server: EmbedServer) -> None:
    with ollama(server.url, model="bge-m3") as embedder:
        embedder.embed("hello")
    (request,) = server.embed_requests
    assert request.method == "POST" and request.path == "/api/embed"
    assert request.body == {"model": "bge-m3", "input": ["hello"], "keep_alive": "30m"}
    assert request.headers["content-type"] == "application/json"
    assert "authorization" not in request.headers


def test_dimensions_sent_only_when_set(server: EmbedServer) -> None:
    with ollama(server.url, dimensions=16) as embedder:
        vector = embedder.embed("hello world")
    (request,) = server.embed_requests
    assert request.body["dimensions"] == 16
    np.testing.assert_array_equal(vector, server.expected(["hello world"], dimensions=16)[0])


def test_keep_alive_empty_is_omitted_and_seconds_become_numbers(server: EmbedServer) -> None:
    for keep_alive, expected in (("", None), ("-1", -1), ("300", 300), ("1h", "1h")):
        server.clear()
        with ollama(server.url, keep_alive=keep_alive) as embedder:
            embedder.embed("x")
        assert server.embed_requests[0].body.get("keep_alive") == expected


def test_api_key_is_not_sent_by_the_ollama_protocol(server: EmbedServer) -> None:
    with ollama(server.url, api_key="secret") as embedder:
        embedder.probe()
        embedder.embed("x")
    assert all("authorization" not in r.headers for r in server.requests)


@pytest.mark.parametrize("suffix", ["", "/", "//"])
def test_trailing_slashes_do_not_change_the_paths(server: EmbedServer, suffix: str) -> None:
    with ollama(server.url + suffix) as embedder:
        assert embedder.probe()
        embedder.embed("x")
    assert [r.path for r in server.requests] == ["/api/tags", "/api/embed"]


def test_proxy_environment_is_ignored(server: EmbedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    dead_proxy = f"http://127.0.0.1:{closed_port()}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(name, dead_proxy)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with ollama(server.url) as embedder:
        assert embedder.probe()
        assert embedder.embed("x").shape == (32,)


def test_one_connection_is_reused(server: EmbedServer) -> None:
    with ollama(server.url) as embedder:
        embedder.probe()
        conn = embedder._conn
        embedder.embed_batch(["a", "b"])
        assert conn is not None and embedder._conn is conn
    with ollama(server.url, transport=httpx.HTTPTransport()) as embedder:
        embedder.probe()
        client = embedder._client
        embedder.embed_batch(["a", "b"])
        assert client is not None and embedder._client is client


def test_close_is_idempotent_and_a_closed_embedder_reopens(server: EmbedServer) -> None:
    embedder = ollama(server.url)
    embedder.close()
    embedder.embed("x")
    embedder.close()
    embedder.close()
    assert embedder.embed("x").shape == (32,)
    embedder.close()


# --- faults -----------------------------------------------------------------------------------

RESPONSE_FAULTS = [
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
]


def test_every_server_mode_is_covered() -> None:
    assert set(MODES) == set(RESPONSE_FAULTS) | {"ok", "wrong_dim", "stall", "trickle", "too_long"}


def test_an_input_past_the_models_context_is_a_response_error_and_a_short_one_embeds(server: EmbedServer) -> None:
    """Mode too_long: the provider refuses one memory (HTTP 400), not every request (embed --all passes over it)."""
    server.mode = "too_long"
    with ollama(server.url) as embedder:
        assert embedder.embed("short text").shape == (server.dim,)
        with pytest.raises(EmbedderResponseError, match="input length exceeds the context length") as info:
            embedder.embed("x" * (TOO_LONG_CHARS + 1))
    assert str(info.value).startswith(f"embedding server at {server.url}")


@pytest.mark.parametrize("mode", RESPONSE_FAULTS)
@pytest.mark.parametrize("texts", [["one text"], ["first text", "second text", "third"]])
def test_bad_responses_raise_response_error(server: EmbedServer, mode: str, texts: list[str]) -> None:
    server.mode = mode
    with ollama(server.url) as embedder, pytest.raises(EmbedderResponseError) as info:
        embedder.embed_batch(texts)
    assert str(info.value).startswith(f"embedding server at {server.url}")


def test_wrong_dimension_raises_when_dimensions_were_requested(server: EmbedServer) -> None:
    server.mode = "wrong_dim"
    expected = "17-dimensional embeddings, 16 were requested"
    with ollama(server.url, dimensions=16) as embedder, pytest.raises(EmbedderResponseError, match=expected):
        embedder.embed("x")


def test_wrong_dimension_is_accepted_when_no_dimensions_were_requested(server: EmbedServer) -> None:
    server.mode = "wrong_dim"
    with ollama(server.url) as embedder:
        assert embedder.embed("x").shape == (33,)  # the native length is whatever the model says


def test_stall_past_the_timeout_raises_unavailable(server: EmbedServer) -> None:
    server.mode = "stall"
    with ollama(server.url, timeout=SHORT) as embedder:
        started = time.monotonic()
        with pytest.raises(EmbedderUnavailable) as info:
            embedder.embed("x")
        assert time.monotonic() - started < 1.0
    assert str(info.value) == f"Ollama embedding provider not available at {server.url}"
    assert isinstance(info.value.__cause__, TimeoutError)  # plain http: the standard library's client


def test_slow_trickle_is_held_to_the_overall_deadline(server: EmbedServer) -> None:
    server.mode = "trickle"
    with ollama(server.url, timeout=SHORT) as embedder:
        started = time.monotonic()
        with pytest.raises(EmbedderUnavailable):
            embedder.embed_batch(["a long enough request"] * 4)
        assert time.monotonic() - started < 1.0


def test_connection_refused_raises_unavailable_chained_from_the_os_error() -> None:
    endpoint = f"http://127.0.0.1:{closed_port()}"
    with ollama(endpoint) as embedder, pytest.raises(EmbedderUnavailable) as info:
        embedder.embed("x")
    assert str(info.value) == f"Ollama embedding provider not available at {endpoint}"
    assert isinstance(info.value.__cause__, ConnectionRefusedError)


def test_connection_refused_through_httpx_is_chained_from_httpx() -> None:
    endpoint = f"http://127.0.0.1:{closed_port()}"
    with ollama(endpoint, transport=httpx.HTTPTransport()) as embedder, pytest.raises(EmbedderUnavailable) as info:
        embedder.embed("x")
    assert isinstance(info.value.__cause__, httpx.ConnectError)


# --- plain http without httpx; the embed request standing in for the probe --------------------


def test_plain_http_never_imports_httpx_or_builds_an_ssl_context(server: EmbedServer) -> None:
    code = (
        "import sys, ssl\n"
        "def refuse(*a, **k):\n    raise AssertionError('an SSL context was built')\n"
        "ssl.SSLContext.__new__ = refuse\n"
        "from mnemon.embed import make_embedder\n"
        f"e = make_embedder(endpoint={server.url!r}, model='m', protocol='auto', api_key=None, keep_alive='',"
        " dimensions=None)\n"
        "assert e.probe() and e.embed('x').shape == (32,) and e.probe_embed('y').shape == (32,)\n"
        "print(sorted(m for m in ('httpx', 'httpcore', 'h11', 'trio') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_kept_alive_connection_is_reused_and_reopened_after_the_server_drops_it(server: EmbedServer) -> None:
    with ollama(server.url) as embedder:
        embedder.embed("a")
        conn = embedder._conn
        assert conn is not None and conn.sock is not None
        embedder.embed("b")
        assert embedder._conn is conn
        conn.sock.shutdown(socket.SHUT_RDWR)  # as if the server closed the idle connection
        assert embedder.embed("c").shape == (32,)


def test_probe_embed_makes_exactly_one_request_when_healthy(server: EmbedServer) -> None:
    with ollama(server.url) as embedder:
        vector = embedder.probe_embed("vector search")
    assert np.array_equal(vector, server.expected(["vector search"])[0])
    assert [(r.method, r.path) for r in server.requests] == [("POST", "/api/embed")]


def test_probe_embed_is_unavailable_when_connection_refused() -> None:
    with ollama(f"http://127.0.0.1:{closed_port()}") as embedder, pytest.raises(EmbedderUnavailable):
        embedder.probe_embed("x")


def test_probe_embed_gives_up_when_silent_and_the_probe_fails(server: EmbedServer) -> None:
    server.mode = "stall"
    with ollama(server.url, probe_timeout=SHORT) as embedder:
        started = time.monotonic()
        with pytest.raises(EmbedderUnavailable):
            embedder.probe_embed("x")
        assert time.monotonic() - started < 2.0  # ~2 x probe_timeout, not the 30 s request time-out
    assert [r.path for r in server.requests] == ["/api/embed", "/api/tags"]


def test_probe_embed_waits_for_a_slow_model_when_the_probe_answers(
    server: EmbedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    respond = server._respond

    def slow_embed(method: str, path: str, headers: dict[str, str], body: object) -> tuple[int, bytes]:
        if method == "POST":
            time.sleep(3 * SHORT)  # a model loading: longer than the probe time-out
        return respond(method, path, headers, body)

    monkeypatch.setattr(server, "_respond", slow_embed)
    with ollama(server.url, probe_timeout=SHORT) as embedder:
        vector = embedder.probe_embed("x")
    assert np.array_equal(vector, server.expected(["x"])[0])
    assert sorted(r.path for r in server.requests) == ["/api/embed", "/api/tags"]


def test_probe_embed_reports_response_errors(server: EmbedServer) -> None:
    server.mode = "not_found"
    with ollama(server.url) as embedder, pytest.raises(EmbedderResponseError):
        embedder.probe_embed("x")


def test_probe_embed_through_httpx_probes_first(server: EmbedServer) -> None:
    with ollama(server.url, transport=httpx.HTTPTransport()) as embedder:
        assert embedder.probe_embed("x").shape == (32,)
    assert [r.path for r in server.requests] == ["/api/tags", "/api/embed"]


def test_server_recovers_after_a_fault(server: EmbedServer) -> None:
    with ollama(server.url) as embedder:
        server.mode = "error500"
        with pytest.raises(EmbedderResponseError, match="HTTP 500: internal server error"):
            embedder.embed("x")
        server.mode = "ok"
        np.testing.assert_array_equal(embedder.embed("x"), server.expected(["x"])[0])


def mock(handler_body: object, status: int = 200) -> httpx.MockTransport:
    content = handler_body if isinstance(handler_body, bytes) else json.dumps(handler_body).encode()
    return httpx.MockTransport(lambda request: httpx.Response(status, content=content))


@pytest.mark.parametrize(
    "payload",
    [
        {"embeddings": [["0.5", "0.5"]]},  # strings are not numbers
        {"embeddings": [[1e400, 0.0]]},  # JSON overflow parses as infinity
        {"embeddings": [[10**400, 1]]},  # an integer too large for float64
        {"embeddings": [[[0.1], [0.2]]]},  # nested
        {"embeddings": [{"v": 1}]},
        {"embeddings": "0.1,0.2"},
        {"embedding": [0.1, 0.2]},  # the legacy /api/embeddings shape is not ours
        [[0.1, 0.2]],
        b"\xff\xfe not utf-8",
        b"",
    ],
)
def test_unusable_payloads_raise_response_error(payload: object) -> None:
    with ollama("http://mock", transport=mock(payload)) as embedder, pytest.raises(EmbedderResponseError):
        embedder.embed("x")


def test_undecodable_body_fails_the_probe_and_the_request() -> None:
    transport = httpx.MockTransport(
        lambda request: httpx.Response(200, headers={"content-encoding": "gzip"}, content=b"not gzip at all")
    )
    with ollama("http://mock", transport=transport) as embedder:
        assert embedder.probe() is False
        with pytest.raises(EmbedderResponseError) as info:
            embedder.embed("x")
    assert isinstance(info.value.__cause__, httpx.DecodingError)


def test_oversized_response_is_refused(server: EmbedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    import mnemon.embed

    monkeypatch.setattr(mnemon.embed, "MAX_RESPONSE_BYTES", 100)
    with ollama(server.url) as embedder, pytest.raises(EmbedderResponseError, match="oversized"):
        embedder.embed("a text whose 32-dimensional vector takes far more than 100 bytes of JSON")


def test_integer_vectors_are_converted_to_float64() -> None:
    with ollama("http://mock", transport=mock({"embeddings": [[1, 0, 2]]})) as embedder:
        vector = embedder.embed("x")
    assert vector.dtype == np.float64 and vector.tolist() == [1.0, 0.0, 2.0]


def test_inconsistent_lengths_across_batches_raise() -> None:
    calls = iter([[[0.1, 0.2]], [[0.1, 0.2, 0.3]]])

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"embeddings": next(calls)})

    transport = httpx.MockTransport(handler)
    with (
        ollama("http://mock", batch_size=1, transport=transport) as embedder,
        pytest.raises(EmbedderResponseError, match="changed the embedding length"),
    ):
        embedder.embed_batch(["a", "b"])


def test_errors_share_the_embedder_base_class() -> None:
    assert issubclass(EmbedderUnavailable, EmbedderError)
    assert issubclass(EmbedderResponseError, EmbedderError)


# --- factory and protocol resolution -----------------------------------------------------------


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        ("http://localhost:11434", "ollama"),
        ("http://localhost:11434/", "ollama"),
        ("https://api.siliconflow.cn/v1", "openai"),
        ("https://api.siliconflow.cn/v1/", "openai"),
        ("http://127.0.0.1:8080/openai/v1", "openai"),
        ("http://127.0.0.1:8080/v1?x=1", "openai"),
        ("http://127.0.0.1:8080/v10", "ollama"),
        ("http://127.0.0.1:8080/api/v1x", "ollama"),
        ("http://v1", "ollama"),  # a host named v1 is not a path
    ],
)
def test_auto_protocol_follows_the_url_path(endpoint: str, expected: str) -> None:
    assert resolve_protocol(endpoint, "auto") == expected
    assert resolve_protocol(endpoint, "") == expected


def test_explicit_protocol_wins_over_the_url() -> None:
    assert resolve_protocol("http://h/v1", "ollama") == "ollama"
    assert resolve_protocol("http://h:11434", " OpenAI ") == "openai"
    with pytest.raises(ValueError):
        resolve_protocol("http://h", "grpc")


def test_factory_picks_the_class_and_does_no_io_in_constructor() -> None:
    endpoint = f"http://127.0.0.1:{closed_port()}"
    ollama_embedder = make_embedder(
        endpoint=endpoint, model="m", protocol="auto", api_key=None, keep_alive="30m", dimensions=None
    )
    openai_embedder = make_embedder(
        endpoint=endpoint + "/v1", model="m", protocol="auto", api_key="k", keep_alive="30m", dimensions=8
    )
    assert (ollama_embedder.protocol, openai_embedder.protocol) == ("ollama", "openai")
    for embedder in (ollama_embedder, openai_embedder):
        assert isinstance(embedder, Embedder)
        assert embedder._client is None  # type: ignore[attr-defined]
        assert embedder.model == "m"
        embedder.close()


def test_factory_rejects_nonsense_dimensions() -> None:
    for dimensions in (0, -3):
        with pytest.raises(ValueError):
            make_embedder(
                endpoint="http://h", model="m", protocol="ollama", api_key=None, keep_alive="", dimensions=dimensions
            )


def test_describe_unavailable_uses_the_contract_wording() -> None:
    with ollama("http://localhost:11434") as embedder:
        assert describe_unavailable(embedder) == "Ollama embedding provider not available at http://localhost:11434"


def test_join_url_is_path_wise() -> None:
    assert join_url("http://h:1", "api/tags") == "http://h:1/api/tags"
    assert join_url("http://h:1/", "/api/tags") == "http://h:1/api/tags"
    assert join_url("http://h:1/v1/", "models") == "http://h:1/v1/models"
    assert join_url("http://h:1/prefix", "api/embed") == "http://h:1/prefix/api/embed"


def test_importing_mnemon_embed_loads_neither_httpx_nor_numpy() -> None:
    code = (
        "import sys, mnemon.embed, mnemon.embed.fake\nprint(sorted(m for m in ('httpx', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=20)
    assert out.stdout.strip() == "[]"


# --- the server as a subprocess (used by CLI tests and benchmarks) ------------------------------


def test_server_subprocess_prints_its_url_and_switches_modes() -> None:
    with EmbedServerProcess(dim=16) as process:
        with ollama(process.url) as embedder:
            assert embedder.probe()
            assert embedder.embed("hello").shape == (16,)
            process.set_mode("error500")
            with pytest.raises(EmbedderResponseError):
                embedder.embed("hello")
        paths = [r["path"] for r in process.requests()]
        assert paths == ["/api/tags", "/api/embed", "/api/embed"]
        process.clear()
        assert process.requests() == []
