"""The memory gateway (issue 25): the official MCP SDK client against a live ``mcp serve --http``,
tokens, and every refusal: 401, 403, 413, 429, malformed JSON-RPC, hostile tool arguments.

Every refusal is checked for what it must not do: store anything, answer with a traceback, or
let a token reach the gateway's log or the oplog.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the gateway tests need mnemon[gateway] (the MCP SDK)")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from mnemon import mcp as tools  # noqa: E402
from mnemon.gateway import tokens  # noqa: E402
from tests.gateway_server import Gateway, create_token, mnemon, serve_store  # noqa: E402


def insight_count(data_dir: Path, store: str = "team") -> int:
    out = mnemon(data_dir, "--store", store, "--readonly", "status").stdout
    return int(json.loads(out)["total_insights"])


class World:
    """One gateway over a data dir with stores team and other, and a token of every kind."""

    def __init__(self, root: Path) -> None:
        self.data = root / "server"
        mnemon(self.data, "store", "create", "team")
        mnemon(self.data, "store", "create", "other")
        self.rw = create_token(self.data, "alice", "team")
        self.ro = create_token(self.data, "reader", "team", "--read-only")
        self.other = create_token(self.data, "bob", "other")
        self.revoked = create_token(self.data, "gone", "team")
        mnemon(self.data, "mcp", "token", "revoke", "gone")
        # An expired token: created as if 3 days ago with a 1-day life (the file format is the CLI's).
        _, self.expired = tokens.create(self.data, "old", "team", read_only=False, expires_days=1,
                                        now=datetime.now(timezone.utc) - timedelta(days=3))
        self.secrets = [self.rw, self.ro, self.other, self.revoked, self.expired]
        self.log = root / "gateway.log"
        self.gateway = Gateway(self.data, self.log, "--rate-limit", "0", "--max-body", "65536")

    def no_token_leaked(self) -> None:
        texts = [self.log.read_text(errors="replace"),
                 mnemon(self.data, "--store", "team", "log", "--limit", "5000").stdout.decode(),
                 (self.data / "gateway" / "tokens.json").read_text()]
        for secret in self.secrets:
            for text in texts:
                assert secret not in text
        assert "Traceback" not in texts[0]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    w = World(tmp_path_factory.mktemp("gateway"))
    with w.gateway:
        yield w
    w.no_token_leaked()


# -- the SDK client: every tool, each result the CLI's JSON ---------------------------------------------

async def _sdk_session(url: str, token: str, calls: list[tuple[str, dict[str, Any]]]) -> tuple[Any, Any, list[Any]]:
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http, \
            streamable_http_client(url, http_client=http) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        listed = await session.list_tools()
        results = [await session.call_tool(name, arguments) for name, arguments in calls]
        return init, listed, results


def _text(result: Any) -> str:
    return "".join(c.text for c in result.content)


UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
WEIGHT = re.compile(r'"weight":\s*[0-9.eE+-]+')
SHORT_ID = re.compile(r"\b[0-9a-f]{8}\b")  # the log's id column
STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def _normal(text: str, ids: dict[str, str]) -> str:
    """Ids, times and temporal weights (they follow the seconds between writes) replaced by stable names."""
    def rename(m: re.Match[str]) -> str:
        return ids.setdefault(m.group(0), f"id{len(ids)}")

    return SHORT_ID.sub("ID", WEIGHT.sub('"weight":"W"', STAMP.sub("T", UUID.sub(rename, text))))


def test_sdk_client_calls_every_tool_and_each_result_is_the_cli_json(tmp_path: Path) -> None:
    """The same commands through the SDK on a gateway store and through the CLI on a twin store."""
    import anyio

    served, local = tmp_path / "served", tmp_path / "local"
    draft = {"schema_version": "1", "insights": [
        {"content": "The team chose PostgreSQL because SQLite could not be shared", "category": "decision",
         "entities": ["PostgreSQL", "SQLite"]},
        {"content": "Caroline prefers short release notes", "category": "preference", "importance": 4}]}
    for data in (served, local):
        mnemon(data, "store", "create", "team")
        mnemon(data, "--store", "team", "import", "-", stdin=json.dumps(draft).encode())
    token = create_token(served, "sdk", "team")
    with Gateway(served, tmp_path / "gw.log") as gateway:
        anchor, second = (json.loads(mnemon(served, "--store", "team", "--readonly", "search", q).stdout)[0]["id"]
                          for q in ("PostgreSQL", "Caroline"))
        calls: list[tuple[str, dict[str, Any]]] = [
            ("status", {}), ("recall", {"query": "why PostgreSQL", "limit": 5}), ("search", {"query": "release"}),
            ("show", {"id": anchor}), ("related", {"id": anchor, "depth": 2}),
            ("remember", {"content": "Deploys happen on Tuesdays", "category": "fact", "tags": ["ops"]}),
            ("import", {"draft": {"schema_version": "1", "insights": [{"content": "Mira owns the billing service"}]}}),
            ("export", {}),
            ("link", {"source_id": anchor, "target_id": second, "type": "causal", "weight": 0.75,
                      "meta": {"why": "test"}}),
            ("forget", {"id": second}),
            ("cli", {"argv": ["log", "--limit", "3"]}),
        ]
        init, listed, results = anyio.run(_sdk_session, gateway.url, token, calls)
    assert init.server_info.name == "mnemon"
    assert {t.name for t in listed.tools} == {*tools.TOOLS, "cli"} == {name for name, _ in calls}  # every tool
    assert all(not r.is_error for r in results), [_text(r) for r in results if r.is_error]
    # The same commands on the twin, one by one through the CLI.
    local_argv = [
        ["status"], ["recall", "--limit", "5", "--", "why PostgreSQL"], ["search", "--", "release"],
        ["show", "--", None], ["related", "--depth", "2", "--", None],
        ["remember", "--cat", "fact", "--tags", "ops", "--", "Deploys happen on Tuesdays"],
        ["import", "-"], ["export"],
        ["link", "--type", "causal", "--weight", "0.75", '--meta={"why": "test"}', "--", None, "SECOND"],
        ["forget", "--", "SECOND"], ["log", "--limit", "3"],
    ]
    local_anchor_id, local_second = (
        json.loads(mnemon(local, "--store", "team", "--readonly", "search", q).stdout)[0]["id"]
        for q in ("PostgreSQL", "Caroline"))
    ids_served: dict[str, str] = {}
    ids_local: dict[str, str] = {}
    for (name, _), result, argv in zip(calls, results, local_argv):
        argv = [local_anchor_id if a is None else local_second if a == "SECOND" else a for a in argv]
        stdin = json.dumps(calls[6][1]["draft"]).encode() if name == "import" else None
        expected = mnemon(local, "--store", "team", *argv, stdin=stdin).stdout.decode()
        got = _text(result)
        if name == "status":  # the database path is each store's own
            got_j, exp_j = json.loads(got), json.loads(expected)
            assert got_j.pop("db_path").startswith(str(served)) and exp_j.pop("db_path").startswith(str(local))
            assert got_j == exp_j
            continue
        if name == "cli":  # the log: every entry the gateway wrote names the token's name, never the token
            assert result.structured_content["exit_code"] == 0
            assert got.count("[token sdk]") == 3 and token not in got
            got = got.replace("[token sdk] ", "")
        if name == "export":  # edges between equal-time rows come in id order, and ids are random
            got_j, exp_j = json.loads(_normal(got, ids_served)), json.loads(_normal(expected, ids_local))
            assert sorted(map(json.dumps, got_j.pop("edges"))) == sorted(map(json.dumps, exp_j.pop("edges")))
            assert got_j == exp_j
            continue
        assert _normal(got, ids_served) == _normal(expected, ids_local), name


# -- tokens ---------------------------------------------------------------------------------------

def test_token_file_keeps_only_hashes_mode_0600_and_list_never_shows_a_token(world: World) -> None:
    path = world.data / "gateway" / "tokens.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    listed = mnemon(world.data, "mcp", "token", "list").stdout.decode()
    names = {t["name"]: t for t in json.loads(listed)}
    assert set(names) == {"alice", "reader", "bob", "gone", "old"}
    assert names["gone"]["revoked"] and names["reader"]["read_only"] and names["bob"]["store"] == "other"
    for secret in world.secrets:
        assert secret not in listed and secret not in path.read_text()
        assert tokens.digest(secret) in path.read_text()


def test_token_commands_refuse_bad_input_with_one_error_line(tmp_path: Path) -> None:
    data = tmp_path / "d"
    mnemon(data, "store", "create", "team")
    for args, message in [
        (["mcp", "token", "create", "x"], "name the store with --store"),
        (["mcp", "token", "create", "x", "--store", "nope"], 'store "nope" does not exist'),
        (["mcp", "token", "create", "bad name", "--store", "team"], "invalid token name"),
        (["mcp", "token", "create", "x", "--store", "team", "--expires", "0"], "--expires must be between"),
        (["mcp", "token", "revoke", "ghost"], 'token "ghost" does not exist'),
    ]:
        proc = mnemon(data, *args, check=False)
        assert proc.returncode == 1 and proc.stdout == b""
        assert proc.stderr.decode().startswith("Error: ") and message in proc.stderr.decode()
        assert "Traceback" not in proc.stderr.decode()
    assert not (data / "gateway" / "tokens.json").exists()
    first = create_token(data, "dup", "team")
    proc = mnemon(data, "mcp", "token", "create", "dup", "--store", "team", check=False)
    assert proc.returncode == 1 and b"already exists" in proc.stderr
    # as the message says: once revoked, the name can be given to a new token (the old one stays refused)
    mnemon(data, "mcp", "token", "revoke", "dup")
    second = create_token(data, "dup", "team")
    from mnemon.gateway import tokens

    table = tokens.TokenTable(data)
    assert table.authenticate(second)[0] is not None and table.authenticate(first)[0] is None
    assert [t.name for t in tokens.load(data)] == ["dup"]


def test_non_loopback_bind_needs_tls_or_a_proxy_flag(tmp_path: Path) -> None:
    proc = mnemon(tmp_path / "d", "mcp", "serve", "--http", "--host", "0.0.0.0", check=False)
    assert proc.returncode == 1
    assert proc.stderr.decode().startswith("Error: refusing to serve on non-loopback address")
    proc = mnemon(tmp_path / "d", "mcp", "serve", "--http", "--tls-cert", "c.pem", check=False)
    assert proc.returncode == 1 and b"--tls-cert and --tls-key go together" in proc.stderr


# -- refusals -------------------------------------------------------------------------------------

REMEMBER = {"content": "refused requests must store nothing"}


@pytest.mark.parametrize("who", ["none", "wrong", "revoked", "expired", "malformed-header"])
def test_without_a_valid_token_401_and_nothing_stored(world: World, who: str) -> None:
    before = insight_count(world.data)
    token = {"none": None, "wrong": "mnemon_" + "A" * 43, "revoked": world.revoked, "expired": world.expired,
             "malformed-header": None}[who]
    headers = {"Authorization": "Basic abc"} if who == "malformed-header" else None
    status, body = world.gateway.post({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                       "params": {"name": "remember", "arguments": REMEMBER}}, token, headers=headers)
    assert status == 401, body
    reason = json.loads(body)["error"]
    assert {"revoked": "token revoked", "expired": "token expired"}.get(who, reason) == reason
    assert insight_count(world.data) == before
    assert f"mnemon gateway: refused 401 POST /mcp: {reason}\n" in world.log.read_text()  # logged, no token


def test_read_only_token_reads_but_writing_is_403(world: World) -> None:
    before = insight_count(world.data)
    for tool, arguments in [("remember", REMEMBER), ("forget", {"id": "x"}), ("link", {"source_id": "a",
                            "target_id": "b"}), ("import", {"draft": {"schema_version": "1", "insights": []}}),
                            ("cli", {"argv": ["remember", "x"]}), ("cli", {"argv": ["gc", "--keep", "x"]})]:
        status, body = world.gateway.call(world.ro, tool, arguments)
        assert status == 403, (tool, body)
    assert 'mnemon gateway: refused 403 POST /mcp: token "reader" is read-only\n' in world.log.read_text()
    status, body = world.gateway.call(world.ro, "recall", {"query": "anything"})
    assert status == 200 and body["result"]["isError"] is False
    status, body = world.gateway.call(world.ro, "import", {"draft": {"schema_version": "1", "insights": [
        {"content": "a dry run stores nothing"}]}, "dry_run": True})
    assert status == 200 and body["result"]["content"][0]["text"].startswith("Dry run: 1 insights")
    assert insight_count(world.data) == before


def test_a_token_for_another_store_is_403(world: World) -> None:
    before = insight_count(world.data)
    status, body = world.gateway.call(world.other, "remember", REMEMBER, path="/mcp/team")
    assert status == 403 and b"does not open store" in json.dumps(body).encode()
    status, body = world.gateway.call(world.rw, "status", {}, path="/mcp/team")
    assert status == 200 and not body["result"]["isError"]
    # A token opens its own store only: bob's status is the other store's.
    status, body = world.gateway.call(world.other, "status", {})
    assert json.loads(body["result"]["content"][0]["text"])["db_path"].endswith("data/other/mnemon.db")
    assert insight_count(world.data) == before


def test_foreign_origin_is_403_and_a_loopback_origin_passes(world: World) -> None:
    before = insight_count(world.data)
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "remember", "arguments": REMEMBER}}
    status, _ = world.gateway.post(message, world.rw, headers={"Origin": "https://evil.example"})
    assert status == 403
    status, _ = world.gateway.post(message, world.rw, headers={"Origin": "http://127.0.0.1.evil.example:80"})
    assert status == 403
    status, _ = world.gateway.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, world.rw,
                                   headers={"Origin": f"http://127.0.0.1:{world.gateway.port}"})
    assert status == 200
    assert insight_count(world.data) == before


@pytest.mark.parametrize("origin", ["http://localhost:1", "http://127.0.0.1", "null", "http://[::1]:80"])
def test_a_loopback_origin_on_another_port_is_403(world: World, origin: str) -> None:
    """Another port on this machine is another origin (a local dev server's page must not reach the gateway)."""
    before = insight_count(world.data)
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "remember", "arguments": REMEMBER}}
    status, body = world.gateway.post(message, world.rw, headers={"Origin": origin})
    assert status == 403 and json.loads(body) == {"error": "origin not allowed"}
    assert insight_count(world.data) == before


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1", "127.0.0.1:1", "localhost:1",
                                  "127.0.0.2:{port}", "0.0.0.0:{port}", "", "localhost.evil.example:{port}"])
def test_a_host_header_other_than_the_bound_loopback_name_and_port_is_421(world: World, host: str) -> None:
    """DNS rebinding: a page of evil.example resolved to 127.0.0.1 sends Host: evil.example (MCP spec)."""
    before = insight_count(world.data)
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "remember", "arguments": REMEMBER}}
    status, body = world.gateway.post(message, world.rw, headers={"Host": host.format(port=world.gateway.port)})
    assert status == 421, body
    assert json.loads(body)["error"].startswith("host not allowed: a loopback gateway answers only")
    assert insight_count(world.data) == before


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}"])
def test_the_bound_loopback_names_with_the_port_are_served(world: World, host: str) -> None:
    status, body = world.gateway.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, world.rw,
                                      headers={"Host": host.format(port=world.gateway.port)})
    assert status == 200, body


def test_oversized_body_is_413(world: World) -> None:
    before = insight_count(world.data)
    big = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
           "params": {"name": "remember", "arguments": {"content": "x" * 70_000}}}
    status, _ = world.gateway.post(big, world.rw)
    assert status == 413
    assert insight_count(world.data) == before


@pytest.mark.parametrize("body, code", [
    (b"{not json", -32700), (b'{"jsonrpc": "2.0"}', -32600), (b"[]", -32600), (b'"text"', -32600),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": "x"}', -32602),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "no/such"}', -32601),
])
def test_malformed_json_rpc_gets_a_json_rpc_error(world: World, body: bytes, code: int) -> None:
    before = insight_count(world.data)
    status, reply = world.gateway.post(body, world.rw)
    assert status in (200, 400), reply
    payload = json.loads(reply)
    errors = payload if isinstance(payload, list) else [payload]
    assert any(e.get("error", {}).get("code") in (code, -32600, -32602) for e in errors), payload
    assert b"Traceback" not in reply
    assert insight_count(world.data) == before


@pytest.mark.parametrize("body, message", [
    # a batch: once a ~1.5 KB pydantic report quoting the request back, now one line (and its calls never run)
    (json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                  "params": {"name": "remember", "arguments": {"content": "sent in a batch"}}}]).encode(),
     "invalid request: batch requests are not supported"),
    (b"[]", "invalid request: batch requests are not supported"),
    # an object id: the SDK took it for a notification (202, no answer)
    (b'{"jsonrpc": "2.0", "id": {}, "method": "tools/call", "params": {"name": "remember", '
     b'"arguments": {"content": "sent with an object id"}}}', "invalid request: id must be a string, a number or null"),
    (b'{"jsonrpc": "2.0", "id": true, "method": "ping"}', "invalid request: id must be a string, a number or null"),
    # a null or fractional id: valid JSON-RPC 2.0, but no MCP request id; the SDK took it for a notification too
    (b'{"jsonrpc": "2.0", "id": null, "method": "tools/call", "params": {"name": "remember", '
     b'"arguments": {"content": "sent with a null id"}}}', "invalid request: an MCP request's id must be a string or an integer"),
    (b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}', "invalid request: an MCP request's id must be a string or an integer"),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": "x"}', "invalid request: not a JSON-RPC 2.0 message"),
    (b'"text"', "invalid request: not a JSON-RPC 2.0 message"),
])
def test_a_body_that_is_no_single_json_rpc_message_is_one_invalid_request(world: World, body: bytes,
                                                                           message: str) -> None:
    before = insight_count(world.data)
    status, reply = world.gateway.post(body, world.rw)
    assert status == 400
    assert json.loads(reply) == {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    assert b"pydantic" not in reply and b"sent " not in reply  # no validation report, no input quoted back
    assert insight_count(world.data) == before
    # a single request still reaches the SDK
    assert json.loads(world.gateway.post({"jsonrpc": "2.0", "id": 7, "method": "ping"}, world.rw)[1]) == {
        "jsonrpc": "2.0", "id": 7, "result": {}}


def test_rate_limit_is_429_with_retry_after(tmp_path: Path) -> None:
    gateway, token = serve_store(tmp_path, "--rate-limit", "0.5", "--burst", "3")
    with gateway:
        statuses = [gateway.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, token)[0] for _ in range(5)]
    assert statuses[:3] == [200, 200, 200] and statuses[3:] == [429, 429]


def test_a_clock_argument_is_refused_unless_the_gateway_was_started_for_tests(world: World, tmp_path: Path) -> None:
    """The remote CLI tests fix the engine's clock through a gateway started with --test-clock; any other gateway
    refuses the argument (a client that sets the clock could backdate a shared store), and it binds loopback only."""
    before = insight_count(world.data)
    backdated = {"argv": ["remember", "backdated to 2020"], "clock": "2020-01-01T00:00:00+00:00"}
    status, body = world.gateway.call(world.rw, "cli", backdated)
    assert status == 200 and body["result"]["isError"] is True
    assert body["result"]["content"][0]["text"] == "Error: unknown argument(s): clock"
    assert insight_count(world.data) == before
    proc = mnemon(tmp_path / "d", "mcp", "serve", "--http", "--host", "0.0.0.0", "--behind-tls-proxy", "--test-clock",
                  check=False)
    assert proc.returncode == 1 and proc.stderr.decode() == \
        "Error: --test-clock is for tests: it serves a loopback address only\n"

    gateway, token = serve_store(tmp_path, "--test-clock", "--workers", "0", token="tester")
    data = gateway.data_dir
    with gateway:
        status, body = gateway.call(token, "cli", backdated)
        assert status == 200 and not body["result"]["isError"], body
        assert json.loads(body["result"]["content"][0]["text"])["created_at"] == "2020-01-01T00:00:00Z"
        for bad in ("2020-01-01T00:00:00", "yesterday", 5):  # no offset, no time, no string
            status, body = gateway.call(token, "cli", {"argv": ["remember", "never stored"], "clock": bad})
            assert body["result"]["isError"] is True and "must be an ISO 8601 time with its UTC offset" in \
                body["result"]["content"][0]["text"]
    assert insight_count(data) == 1
    assert "--test-clock: clients may fix the clock" in gateway.log.read_text()


def test_raw_calls_carry_bytes_that_are_not_utf8_and_a_read_only_token_may_send_them(world: World) -> None:
    """The remote CLI sends argv and stdin that are not UTF-8 as base64 (JSON has no string for them): the
    command meets the same bytes as a local run and refuses them in its own words; what a raw call would run
    decides a read-only token's 403 as for any other call."""
    import base64

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    before = insight_count(world.data)
    show = {"argv": [b64(b"show"), b64(b"\xff")], "stdin": "", "raw": True}
    for token in (world.rw, world.ro):
        status, body = world.gateway.call(token, "cli", show)
        assert status == 200 and body["result"]["content"][0]["text"] == "Error: id is not valid UTF-8", body
    status, body = world.gateway.call(world.rw, "cli", {"argv": [b64(b"remember"), b64(b"-")], "raw": True,
                                                        "stdin": b64(b"piped \xc3\x28 invalid")})
    assert body["result"]["content"][0]["text"] == "Error: content is not valid UTF-8"
    status, body = world.gateway.call(world.ro, "cli", {"argv": [b64(b"remember"), b64(b"fine")], "raw": True})
    assert status == 403, body
    for bad in ({"argv": ["not base64!"], "raw": True}, {"argv": [b64(b"status")], "stdin": "%%", "raw": True}):
        status, body = world.gateway.call(world.rw, "cli", bad)
        assert body["result"]["isError"] is True and "base64" in body["result"]["content"][0]["text"], body
    assert insight_count(world.data) == before


# -- 1,000 hostile tool calls ---------------------------------------------------------------------

_JUNK = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
                  st.text(max_size=30), st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=5),
                  st.integers(), max_size=2))


@st.composite
def hostile_call(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A tool call whose arguments break its schema (wrong type, unknown key, missing or bad value)."""
    tool = draw(st.sampled_from(sorted({*tools.TOOLS, "cli"})))
    schema = tools.TOOLS[tool]["inputSchema"] if tool != "cli" else {"properties": {"argv": {}}, "required": ["argv"]}
    props = sorted(schema["properties"])
    how = draw(st.sampled_from(["unknown", "wrong-type", "missing", "bad-value", "cli-argv"]))
    args: dict[str, Any] = {}
    if how == "unknown" or not props:
        args[draw(st.text(min_size=1, max_size=12).filter(lambda k: k not in props))] = draw(_JUNK)
        for p in schema.get("required", []):
            args[p] = "x"
    elif how == "wrong-type":
        key = draw(st.sampled_from(props))
        args[key] = draw(st.one_of(st.lists(st.integers(), min_size=1, max_size=2), st.dictionaries(
            st.sampled_from(["a", "b"]), st.integers(), min_size=1, max_size=2)) if tool != "import" or key != "draft"
            else st.integers())
    elif how == "missing":
        args = {p: "x" for p in props if p not in schema.get("required", [])}
        args = {k: v for k, v in args.items() if k in ("source", "category")}
        if not schema.get("required"):
            args[draw(st.text(min_size=1, max_size=12).filter(lambda k: k not in props))] = 1
    elif how == "bad-value":
        args = {p: "x" for p in schema.get("required", [])}
        if tool in ("recall", "search"):
            args["limit"] = draw(st.integers(max_value=0))
        elif tool == "remember":
            args["importance"] = draw(st.sampled_from([0, 6, -1, 99]))
            args["content"] = draw(st.text(min_size=1, max_size=20))
        elif tool == "link":
            args["weight"] = draw(st.sampled_from([-1, 2, 1e300]))
        elif tool == "related":
            args["depth"] = draw(st.integers(max_value=0))
        elif tool == "import":
            args["draft"] = draw(st.sampled_from(['{"schema_version": "2", "insights": []}', "{not json", "[]",
                                                  '{"schema_version": "1", "insights": [{"content": ""}]}']))
        else:
            args["bogus"] = draw(_JUNK)
    else:
        tool = "cli"
        argv = draw(st.sampled_from([
            ["store", "create", "x"], ["setup"], ["remember", "--store", "other", "x"], ["gc", "--compact"],
            ["export", "--output", "/tmp/leak.json"], ["import", "/etc/passwd"], ["doctor", "--repair"],
            ["recall", "--data-dir", "/", "x"], ["mcp", "token", "create", "x"], ["remember", "--imp", "9", "x"],
            [], ["remember"], ["link", "a"], ["forget"],
        ]))
        args = {"argv": argv}
    return tool, args


@settings(max_examples=1000, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(call=hostile_call())
def test_1000_hostile_tool_calls_are_refused_and_store_nothing(world: World, call: tuple[str, dict[str, Any]]) -> None:
    tool, arguments = call
    status, body = world.gateway.call(world.rw, tool, arguments)
    assert status == 200, (tool, arguments, body)
    assert "Traceback" not in json.dumps(body)
    if "error" in body:
        assert body["error"]["code"] in (-32602, -32600)
    else:
        assert body["result"]["isError"] is True, (tool, arguments, body)
        assert body["result"]["content"][0]["text"].startswith("Error: ")


def test_after_the_hostile_calls_nothing_was_stored(world: World) -> None:
    """Runs after the property test (file order): the hostile calls left the store as it was."""
    status = json.loads(mnemon(world.data, "--store", "team", "--readonly", "status").stdout)
    assert status["total_insights"] == 0 and status["deleted_insights"] == 0 and status["edge_count"] == 0
    assert not Path("/tmp/leak.json").exists()  # export --output never wrote on the gateway's machine
    world.no_token_leaked()
