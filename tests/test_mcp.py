"""`mnemon mcp serve`: a whole MCP session over stdio, tool results equal to the CLI's JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO, run_process


class Session:
    def __init__(self, data_dir: Path, *args: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mnemon", "--data-dir", str(data_dir), "mcp", *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        self.next_id = 0

    def send(self, payload: object) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((payload if isinstance(payload, str) else json.dumps(payload)) + "\n")
        self.proc.stdin.flush()

    def receive(self) -> dict:
        assert self.proc.stdout is not None
        return json.loads(self.proc.stdout.readline())

    def request(self, method: str, params: dict | None = None) -> dict:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}})
        reply = self.receive()
        assert reply["id"] == self.next_id
        return reply

    def call(self, tool: str, **arguments: object) -> dict:
        return self.request("tools/call", {"name": tool, "arguments": arguments})["result"]

    def close(self) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        assert self.proc.returncode == 0
        return self.proc.stderr.read() if self.proc.stderr else ""


def text(result: dict) -> str:
    assert result["content"][0]["type"] == "text"
    return result["content"][0]["text"]


def test_mcp_session_over_stdio(data_dir):
    s = Session(data_dir, "serve")
    init = s.request("initialize", {"protocolVersion": "2025-03-26", "capabilities": {},
                                    "clientInfo": {"name": "pytest", "version": "1"}})["result"]
    assert init["protocolVersion"] == "2025-03-26" and init["serverInfo"]["name"] == "mnemon"
    assert "tools" in init["capabilities"]
    s.send({"jsonrpc": "2.0", "method": "notifications/initialized"})  # no reply to a notification
    assert s.request("ping")["result"] == {}

    tools = {t["name"]: t for t in s.request("tools/list")["result"]["tools"]}
    assert set(tools) == {"remember", "recall", "search", "show", "link", "related", "forget", "status", "import", "export"}
    assert tools["remember"]["inputSchema"]["required"] == ["content"]

    first = s.call("remember", content="Chose Qdrant because Rust performance is critical", category="decision",
                   importance=5, tags=["db"])
    assert first["isError"] is False
    stored = json.loads(text(first))
    assert stored["action"] == "added" and stored["category"] == "decision" and stored["tags"] == ["db"]
    second = json.loads(text(s.call("remember", content="Switched from Qdrant to Milvus for the GPU index",
                                    category="decision")))

    recall = s.call("recall", query="why Qdrant", limit=5)
    assert recall["isError"] is False
    ids = [r["id"] for r in json.loads(text(recall))["results"]]
    assert stored["id"] in ids

    linked = json.loads(text(s.call("link", source_id=second["id"], target_id=stored["id"], type="supersedes",
                                    weight=1.0)))
    assert linked["status"] == "linked" and linked["edge_type"] == "supersedes"
    assert json.loads(text(s.call("show", id=stored["id"])))["content"].startswith("Chose Qdrant")
    related = json.loads(text(s.call("related", id=second["id"], depth=1)))
    assert stored["id"] in [r["id"] for r in related]
    status = json.loads(text(s.call("status")))
    assert status["total_insights"] == 2

    # The same JSON as the shell command (search has no side effect on its own output).
    mcp_search = text(s.call("search", query="Qdrant"))
    cli_search = run_process(["search", "Qdrant"], data_dir=data_dir)
    assert mcp_search == cli_search.out

    bad = s.call("remember", content="x", importance=9)
    assert bad["isError"] is True and text(bad) == "Error: importance must be 1-5, got 9"
    missing = s.call("show", id="--readonly")  # a flag-looking value is only ever an argument
    assert missing["isError"] is True and text(missing) == "Error: insight --readonly not found"
    typed = s.call("recall", query="x", limit="ten")
    assert typed["isError"] is True and "limit" in text(typed)
    assert s.call("forget", id=second["id"])["isError"] is False
    assert json.loads(text(s.call("status")))["total_insights"] == 1

    assert s.request("tools/call", {"name": "drop_tables", "arguments": {}})["error"]["code"] == -32602
    # arguments that are no object, even an empty list, are said to be so (a [] read as {} once and the call ran,
    # answering that "content" is required); absent or null is no arguments
    for wrong in ([], "", 0, ["content", "x"]):
        assert s.request("tools/call", {"name": "remember", "arguments": wrong})["error"] == {
            "code": -32602, "message": "arguments must be an object"}
    assert json.loads(text(s.request("tools/call", {"name": "status", "arguments": None})["result"]))[
        "total_insights"] == 1
    assert s.request("resources/list")["error"]["code"] == -32601
    s.send("{not json")
    assert s.receive()["error"]["code"] == -32700
    # JSON-RPC 2.0: an empty batch is one Invalid Request answer (it was none), an id must be a string, a number
    # or null (an object, an array or true was echoed back and the call run), NaN is no JSON (echoed as NaN)
    bad_id = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600,
                                                      "message": "invalid request: id must be a string, a number or null"}}
    s.send("[]")
    s.send({"jsonrpc": "2.0", "id": "after", "method": "ping"})  # so that a missing answer fails, not hangs
    assert s.receive() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32600,
                                                                  "message": "invalid request: empty batch"}}
    assert s.receive() == {"jsonrpc": "2.0", "id": "after", "result": {}}
    for bad in ({}, [1], True):
        s.send({"jsonrpc": "2.0", "id": bad, "method": "tools/call",
                "params": {"name": "remember", "arguments": {"content": "sent with a bad id"}}})
        assert s.receive() == bad_id
    s.send([{"jsonrpc": "2.0", "id": "a", "method": "ping"}, {"jsonrpc": "2.0", "id": {}, "method": "ping"}])
    assert s.receive() == [{"jsonrpc": "2.0", "id": "a", "result": {}}, bad_id]
    s.send('{"jsonrpc": "2.0", "id": NaN, "method": "ping"}')
    assert s.receive() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}}
    # a number past a double's range reads as infinity: it was echoed back as Infinity, a reply that is no JSON
    for huge in ("1e400", "-1e400"):
        s.send(f'{{"jsonrpc": "2.0", "id": {huge}, "method": "ping"}}')
        assert s.receive() == bad_id
    # a lone surrogate (a legal JSON escape) echoed back in an id or an error: the write raised, the session ended
    s.send('{"jsonrpc": "2.0", "id": "\\ud800", "method": "ping"}')
    assert s.proc.stdout is not None and s.proc.stdout.readline() == '{"jsonrpc":"2.0","id":"\\ud800","result":{}}\n'
    s.send('{"jsonrpc": "2.0", "id": 99, "method": "x\\udc00"}')
    assert s.receive()["error"] == {"code": -32601, "message": "method not found: x\udc00"}
    assert s.request("ping")["result"] == {}  # the session goes on
    s.close()
    assert run_process(["status"], data_dir=data_dir).json()["total_insights"] == 1


def test_bare_mcp_serves_too(data_dir):
    s = Session(data_dir)
    assert s.request("initialize", {"protocolVersion": "1999-01-01"})["result"]["protocolVersion"] == "2025-06-18"
    assert json.loads(text(s.call("status")))["total_insights"] == 0
    s.close()


def test_a_line_that_is_no_utf8_is_a_parse_error_and_stores_nothing(data_dir):
    # it was decoded with U+FFFD in place of the bad byte, and a remember stored that changed content
    s = Session(data_dir, "serve")
    assert s.proc.stdin is not None
    s.proc.stdin.buffer.write(b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", '
                              b'"params": {"name": "remember", "arguments": {"content": "caf\xe9 latte"}}}\n')
    s.proc.stdin.buffer.flush()
    assert s.receive() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}}
    s.proc.stdin.buffer.write('{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "remember", '
                              '"arguments": {"content": "café au lait"}}}\n'.encode())  # raw UTF-8 still reads
    s.proc.stdin.buffer.flush()
    assert json.loads(text(s.receive()["result"]))["content"] == "café au lait"
    s.close()
    assert run_process(["status"], data_dir=data_dir).json()["total_insights"] == 1


def test_link_tool_meta_with_a_lone_surrogate_is_a_tool_error_and_links_nothing(data_dir):
    """The MCP link tool reaches the engine's link, whose metadata check refuses a lone surrogate (a JSON
    ``\\ud800`` escape in the tool's ``meta``) as it does for the CLI: it was a traceback, not a tool error."""
    s = Session(data_dir, "serve")
    a = json.loads(text(s.call("remember", content="alpha first note")))["id"]
    b = json.loads(text(s.call("remember", content="beta second remark")))["id"]
    for meta, shown in (({"k": "\ud800"}, '"k"'), ({"\udc00": "v"}, '"\\udc00"')):
        bad = s.call("link", source_id=a, target_id=b, type="causal", meta=meta)
        assert bad["isError"] is True
        assert text(bad) == f"Error: invalid metadata JSON: metadata[{shown}] is not valid UTF-8"
    s.close()
    edges = run_process(["related", a, "--edge", "causal"], data_dir=data_dir).json()
    assert edges == []
