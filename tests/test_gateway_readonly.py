"""A read-only token reads the live store (issue 25): what another token committed a moment ago, with a
writer and checkpoints running meanwhile, on SQLite and on PostgreSQL behind the gateway.

The CLI's ``--readonly`` is the immutable snapshot open (contract §2.3: "not for following a live DB"): it
skips the WAL, so a gateway serving read-only tokens through it missed every commit still in the WAL (any
commit while another connection held the database open) and could read a page a checkpoint was rewriting.
The gateway's read-only calls open the live database read-only instead; they still write nothing.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

pytest.importorskip("mcp", reason="the gateway tests need mnemon[gateway] (the MCP SDK)")

from tests.gateway_server import Gateway, create_token, mnemon  # noqa: E402

ROUNDS = 12


class Served:
    """A gateway over store ``team`` (SQLite, or a PostgreSQL schema) with a write and a read-only token."""

    def __init__(self, root: Path, backend: str, request: pytest.FixtureRequest) -> None:
        self.data = root / "server"
        self.backend = backend
        self.schema: str | None = None
        if backend == "postgres":
            from tests import pg_cluster

            self.url = request.getfixturevalue("pg_url")
            self.schema = pg_cluster.register(self.data, "team", self.url)
            mnemon(self.data, "--store", "team", "status")  # the first writable open creates the schema
        else:
            mnemon(self.data, "store", "create", "team")
        self.writer = create_token(self.data, "alice", "team")
        self.reader = create_token(self.data, "reader", "team", "--read-only")
        self.gateway = Gateway(self.data, root / "gateway.log", "--rate-limit", "0")

    def call(self, token: str, tool: str, arguments: dict[str, Any]) -> str:
        status, body = self.gateway.call(token, tool, arguments)
        assert status == 200, body
        result = body["result"]
        assert not result["isError"], result
        return str(result["content"][0]["text"])

    def close(self) -> None:
        self.gateway.stop()
        if self.schema is not None:
            from tests import pg_cluster

            pg_cluster.drop_schema(self.url, self.schema)


@pytest.fixture(params=["sqlite", "postgres"])
def served(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Served]:
    world = Served(tmp_path, request.param, request)
    try:
        yield world
    finally:
        world.close()


class Churn(threading.Thread):
    """Another client writing through the gateway all along, and on SQLite a connection of its own that
    holds the database open (so a command's close does not fold the WAL into the file) and checkpoints it
    now and then (the moment an immutable reader could read a page being rewritten)."""

    def __init__(self, served: Served) -> None:
        super().__init__(daemon=True)
        self.served, self.stop, self.writes, self.errors = served, threading.Event(), 0, []  # type: list[str]
        self.holder = None
        if served.backend == "sqlite":
            self.holder = apsw.Connection(str(served.data / "data" / "team" / "mnemon.db"))
            self.holder.set_busy_timeout(10_000)

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.served.call(self.served.writer, "remember", {"content": f"churn write {self.writes}",
                                                                  "no_diff": True})
                self.writes += 1
                if self.holder is not None and self.writes % 3 == 0:
                    self.holder.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            except (AssertionError, apsw.Error) as exc:  # reported by the test, not lost in the thread
                self.errors.append(repr(exc))
                return

    def finish(self) -> None:
        self.stop.set()
        self.join(timeout=120)
        if self.holder is not None:
            self.holder.close()


def test_a_read_only_token_sees_each_commit_at_once_with_a_writer_running(served: Served) -> None:
    churn = Churn(served)
    churn.start()
    try:
        for n in range(ROUNDS):
            content = f"Deploy window {n} moved to Thursday because of the freeze"
            new_id = json.loads(served.call(served.writer, "remember", {"content": content, "no_diff": True}))["id"]
            # At once, through the read-only token: every read path sees the row just committed.
            recalled = json.loads(served.call(served.reader, "recall", {"query": f"deploy window {n} Thursday"}))
            assert new_id in [hit["id"] for hit in recalled["results"]], (n, recalled)
            assert new_id in [hit["id"] for hit in json.loads(served.call(served.reader, "search", {
                "query": f"window {n} Thursday freeze"}))]
            assert json.loads(served.call(served.reader, "show", {"id": new_id}))["content"] == content
            exported = json.loads(served.call(served.reader, "export", {}))
            assert content in [item["content"] for item in exported["insights"]]
            remote = json.loads(served.call(served.reader, "cli", {"argv": ["search", "--", content]}))
            assert new_id in [hit["id"] for hit in remote]
            status = json.loads(served.call(served.reader, "status", {}))
            assert status["total_insights"] >= n + 1
    finally:
        churn.finish()
    assert not churn.errors, churn.errors
    assert churn.writes > 0
    # The reads wrote nothing: no access count bumped, no oplog entry in the reader's name.
    log = mnemon(served.data, "--store", "team", "log", "--limit", "100000").stdout.decode()
    assert "[token reader]" not in log and "[token alice]" in log
    draft = json.loads(mnemon(served.data, "--store", "team", "export").stdout)
    assert len(draft["insights"]) == ROUNDS + churn.writes
    for hit in json.loads(mnemon(served.data, "--store", "team", "--readonly", "search", "Deploy window").stdout):
        shown = json.loads(mnemon(served.data, "--store", "team", "--readonly", "show", hit["id"]).stdout)
        assert shown["access_count"] == 0, shown
