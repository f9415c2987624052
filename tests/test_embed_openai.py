"""The OpenAI-compatible embedding client against the local server (spec §4.13 [Δ], issue #117)."""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
from embed_server import EmbedServer

from mnemon.embed import describe_unavailable, make_embedder
from mnemon.embed.openai import OpenAIEmbedder
from mnemon.errors import EmbedderResponseError, EmbedderUnavailable

SHORT = 0.3


@pytest.fixture(scope="module")
def module_server() -> Iterator[EmbedServer]:
    with EmbedServer(dim=24, stall_seconds=1.5) as server:
        yield server


@pytest.fixture
def server(module_server: EmbedServer) -> EmbedServer:
    module_server.mode = "ok"
    module_server.api_key = None
    module_server.clear()
    return module_server


def openai(endpoint: str, **kwargs: object) -> OpenAIEmbedder:
    options: dict[str, object] = dict(
        endpoint=endpoint,
        model="bge-m3",
        protocol="auto",
        api_key=None,
        keep_alive="30m",
        dimensions=None,
    )
    options.update(kwargs)
    embedder = make_embedder(**options)  # type: ignore[arg-type]
    assert isinstance(embedder, OpenAIEmbedder)
    return embedder


def test_auto_protocol_picks_openai_for_v1_endpoints(server: EmbedServer) -> None:
    assert openai(server.openai_url).protocol == "openai"
    assert openai(server.openai_url + "/").protocol == "openai"
    assert openai(server.url, protocol="openai").protocol == "openai"


@pytest.mark.parametrize("suffix", ["", "/"])
def test_v1_with_or_without_slash_hits_the_same_paths(server: EmbedServer, suffix: str) -> None:
    with openai(server.openai_url + suffix) as embedder:
        assert embedder.probe() is True
        vector = embedder.embed("hello world")
    assert [(r.method, r.path) for r in server.requests] == [("GET", "/v1/models"), ("POST", "/v1/embeddings")]
    np.testing.assert_array_equal(vector, server.expected(["hello world"])[0])


def test_probe_false_on_refused_stalled_or_failing_server(server: EmbedServer) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    with openai(f"http://127.0.0.1:{closed}/v1", probe_timeout=SHORT) as embedder:
        assert embedder.probe() is False
    server.mode = "stall"
    with openai(server.openai_url, probe_timeout=SHORT) as embedder:
        started = time.monotonic()
        assert embedder.probe() is False
        assert time.monotonic() - started < 1.0
    server.mode = "unavailable"
    with openai(server.openai_url) as embedder:
        assert embedder.probe() is False


def test_batch_rows_match_inputs(server: EmbedServer) -> None:
    texts = ["alpha", "beta gamma", "alpha beta"]
    with openai(server.openai_url, batch_size=2) as embedder:
        matrix = embedder.embed_batch(texts)
    assert matrix.shape == (3, 24) and matrix.dtype == np.float64
    np.testing.assert_array_equal(matrix, server.expected(texts))
    assert [r.body["input"] for r in server.embed_requests] == [texts[:2], texts[2:]]


def test_body_has_model_and_input_but_no_keep_alive(server: EmbedServer) -> None:
    with openai(server.openai_url) as embedder:
        embedder.embed("x")
    assert server.embed_requests[0].body == {"model": "bge-m3", "input": ["x"]}


def test_dimensions_sent_when_set(server: EmbedServer) -> None:
    with openai(server.openai_url, dimensions=8) as embedder:
        vector = embedder.embed("x y")
    assert server.embed_requests[0].body == {"model": "bge-m3", "input": ["x y"], "dimensions": 8}
    np.testing.assert_array_equal(vector, server.expected(["x y"], dimensions=8)[0])


def test_bearer_key_on_every_request(server: EmbedServer) -> None:
    server.api_key = "sk-test"
    with openai(server.openai_url, api_key="sk-test") as embedder:
        assert embedder.probe()
        embedder.embed("x")
    assert [r.headers.get("authorization") for r in server.requests] == ["Bearer sk-test"] * 2
    assert "sk-test" not in repr(embedder)


@pytest.mark.parametrize("api_key", [None, ""])
def test_no_authorization_header_without_a_key(server: EmbedServer, api_key: str | None) -> None:
    with openai(server.openai_url, api_key=api_key) as embedder:
        embedder.probe()
        embedder.embed("x")
    assert all("authorization" not in r.headers for r in server.requests)


def test_wrong_key_fails_the_probe_and_the_request(server: EmbedServer) -> None:
    server.api_key = "sk-right"
    with openai(server.openai_url, api_key="sk-wrong") as embedder:
        assert embedder.probe() is False
        with pytest.raises(EmbedderResponseError, match="HTTP 401: invalid api key"):
            embedder.embed("x")


FAULTS = [
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


@pytest.mark.parametrize("mode", FAULTS)
@pytest.mark.parametrize("texts", [["one"], ["one", "two", "three"]])
def test_bad_responses_raise_response_error(server: EmbedServer, mode: str, texts: list[str]) -> None:
    server.mode = mode
    with openai(server.openai_url) as embedder, pytest.raises(EmbedderResponseError):
        embedder.embed_batch(texts)


def test_not_found_message_carries_the_servers_error(server: EmbedServer) -> None:
    server.mode = "not_found"
    with openai(server.openai_url) as embedder, pytest.raises(EmbedderResponseError) as info:
        embedder.embed("x")
    assert str(info.value) == (
        f'embedding server at {server.openai_url} returned HTTP 404: model "bge-m3" not found, try pulling it first'
    )


def test_wrong_dimension_with_dimensions_requested(server: EmbedServer) -> None:
    server.mode = "wrong_dim"
    with openai(server.openai_url, dimensions=8) as embedder, pytest.raises(EmbedderResponseError):
        embedder.embed("x")


def test_stall_raises_unavailable_with_the_openai_message(server: EmbedServer) -> None:
    server.mode = "stall"
    with openai(server.openai_url, timeout=SHORT) as embedder, pytest.raises(EmbedderUnavailable) as info:
        embedder.embed("x")
    assert str(info.value) == f"OpenAI-compatible embedding provider not available at {server.openai_url}"
    assert str(info.value) == describe_unavailable(embedder)
    assert isinstance(info.value.__cause__, TimeoutError)  # plain http: the standard library client


def data_transport(data: object) -> httpx.MockTransport:
    return httpx.MockTransport(lambda request: httpx.Response(200, json={"object": "list", "data": data}))


def test_data_is_ordered_by_index() -> None:
    data = [{"index": 1, "embedding": [0.0, 2.0]}, {"index": 0, "embedding": [1.0, 0.0]}]
    with openai("http://mock/v1", transport=data_transport(data)) as embedder:
        matrix = embedder.embed_batch(["a", "b"])
    assert matrix.tolist() == [[1.0, 0.0], [0.0, 2.0]]


def test_data_without_index_keeps_response_order() -> None:
    data = [{"embedding": [0.0, 2.0]}, {"embedding": [1.0, 0.0]}]
    with openai("http://mock/v1", transport=data_transport(data)) as embedder:
        assert embedder.embed_batch(["a", "b"]).tolist() == [[0.0, 2.0], [1.0, 0.0]]


@pytest.mark.parametrize(
    "data",
    [
        [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}],  # duplicate index
        [{"index": 0, "embedding": [1.0]}, {"index": 5, "embedding": [1.0]}],  # out of range
        [{"index": 0, "embedding": "AAAAAAAA8D8="}, {"index": 1, "embedding": "AAAAAAAA8D8="}],  # base64
        [[1.0], [1.0]],
        None,
        "nope",
    ],
)
def test_unusable_data_raises_response_error(data: object) -> None:
    with openai("http://mock/v1", transport=data_transport(data)) as embedder, pytest.raises(EmbedderResponseError):
        embedder.embed_batch(["a", "b"])


def test_https_endpoints_keep_certificate_verification() -> None:
    with openai("https://api.example.invalid/v1") as embedder:
        pool = embedder._http()._transport._pool  # type: ignore[attr-defined]
        assert pool._ssl_context.verify_mode == ssl.CERT_REQUIRED
