"""Remote stores (issue 25): ``store create NAME --remote URL``, the CLI through a live gateway as a
hook runs it (whole processes), the same bytes and exit codes as the store's own machine, commands
without a remote form, and an unreachable gateway within 2 seconds."""

from __future__ import annotations

import json
import os
import socket
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the gateway tests need mnemon[gateway] (the MCP SDK)")

from tests.gateway_server import create_token, mnemon, serve_store  # noqa: E402


class Pair:
    """A gateway's data dir (store ``team``) and a client data dir whose ``team`` is that store, remote."""

    def __init__(self, root: Path) -> None:
        self.gateway, self.token = serve_store(root, "--rate-limit", "0", token="laptop")
        self.server, self.client = self.gateway.data_dir, root / "client"
        self.reader = create_token(self.server, "hook", "team", "--read-only")
        mnemon(self.client, "store", "create", "team", "--remote", f"{self.gateway.url}/team")
        mnemon(self.client, "store", "set", "team")

    def remote(self, *args: str, stdin: bytes | None = None, token: str | None = None):
        return mnemon(self.client, *args, stdin=stdin, env={"MNEMON_TOKEN": token or self.token}, check=False)

    def local(self, *args: str, stdin: bytes | None = None):
        return mnemon(self.server, "--store", "team", *args, stdin=stdin, check=False)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    p = Pair(tmp_path_factory.mktemp("remote"))
    with p.gateway:
        yield p
    log = p.gateway.log.read_text()
    assert p.token not in log and p.reader not in log and "Traceback" not in log


def test_registration_is_0600_holds_no_token_and_store_list_shows_the_kind(pair: Pair) -> None:
    path = pair.client / "data" / "team" / "remote.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert json.loads(path.read_text()) == {"backend": "remote", "url": f"{pair.gateway.url}/team",
                                            "token_env": "MNEMON_TOKEN"}
    mnemon(pair.client, "store", "create", "mine")
    listed = mnemon(pair.client, "store", "list").stdout.decode()
    assert listed == "  mine\n* team  (remote)\n"


@pytest.mark.parametrize("args, message", [
    (["--remote", "ftp://x/mcp"], "invalid gateway URL"),
    (["--remote", "http://user:pw@host/mcp"], "credentials"),
    (["--remote", "http://host/mcp?token=mnemon_secret"], "query or fragment"),
    (["--remote", "http://host/mcp#mnemon_secret"], "query or fragment"),
    (["--remote", "http://h/mcp", "--token-env", "1BAD"], "invalid environment variable name"),
    (["--remote", "http://h/mcp", "--postgres", "service=x"], "cannot be used together"),
    (["--remote", "http://memory.example/mcp/team"], "refusing a plain http:// gateway URL for another machine"),
    (["--remote", "http://10.0.0.7:7411/mcp"], "the token would cross the network in clear; use https://"),
])
def test_store_create_remote_refuses_bad_input(tmp_path: Path, args: list[str], message: str) -> None:
    proc = mnemon(tmp_path / "d", "store", "create", "r", *args, check=False)
    assert proc.returncode == 1 and proc.stderr.decode().startswith("Error: ") and message in proc.stderr.decode()
    assert not (tmp_path / "d" / "data" / "r").exists() and b"secret" not in proc.stderr


def test_memory_commands_print_what_the_store_prints_locally(pair: Pair, tmp_path: Path) -> None:
    draft = {"schema_version": "1", "insights": [
        {"content": "We moved the build to GitHub Actions because Jenkins kept failing", "category": "decision",
         "entities": ["GitHub Actions", "Jenkins"]},
        {"content": "Noor prefers squash merges", "category": "preference"}]}
    draft_file = tmp_path / "draft.json"
    draft_file.write_text(json.dumps(draft))
    imported = pair.remote("import", str(draft_file))
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["imported"] == 2
    added = pair.remote("remember", "-", "--cat", "fact", stdin="Releases ship on Thursdays".encode())
    assert added.returncode == 0, added.stderr
    new_id = json.loads(added.stdout)["id"]
    for args in (["show", new_id], ["search", "merges"], ["status"], ["related", new_id], ["gc"],
                 ["log", "--limit", "5"], ["export"], ["recall", "CI"], ["recall", "--verbose", "why CI"],
                 ["import", "--dry-run", "-"]):
        stdin = json.dumps(draft).encode() if args[0] == "import" else None
        # --readonly: a read counts an access otherwise, and the second run would print that count
        local = pair.local("--readonly", *args, stdin=stdin)
        remote = pair.remote("--readonly", *args, stdin=stdin)
        assert (remote.returncode, remote.stdout, remote.stderr) == (local.returncode, local.stdout, local.stderr), args
    receipt = pair.remote("receipt", "--limit", "3")  # its generated_at is the second it ran
    assert receipt.returncode == 0 and json.loads(receipt.stdout)["schema"] == "mnemon.memory.receipt.v1"
    # export -o writes on this machine
    out = tmp_path / "export.json"
    exported = pair.remote("export", "-o", str(out))
    assert exported.returncode == 0 and exported.stdout == b"" and exported.stderr == f"written to {out}\n".encode()
    assert json.loads(out.read_text())["schema_version"] == "1"
    # writes: link, gc --keep, forget
    other = json.loads(pair.remote("search", "Noor").stdout)[0]["id"]
    linked = pair.remote("link", new_id, other, "--type", "causal", "--weight", "0.7")
    assert linked.returncode == 0 and json.loads(linked.stdout)["edge_type"] == "causal"
    assert pair.remote("gc", "--keep", other).returncode == 0
    forgot = pair.remote("forget", new_id)
    assert forgot.returncode == 0 and json.loads(forgot.stdout)["id"] == new_id
    # the oplog names who wrote through the gateway: the token's name, never the token
    log = pair.local("log", "--limit", "3").stdout.decode()
    forget_row = next(line for line in log.splitlines() if " forget " in line)
    assert forget_row.split()[2:] == [new_id[:8], "[token", "laptop]"] and pair.token not in log


def test_export_output_inside_the_client_data_folder_is_refused_before_the_call(pair: Pair) -> None:
    # The local file is checked against the data dir the remote store was resolved under (the client's).
    registration = pair.client / "data" / "team" / "remote.json"
    before = registration.read_bytes()
    for target in (registration, pair.client / "data" / "team" / "draft.json"):
        res = pair.remote("export", "-o", str(target))
        assert res.returncode == 1 and res.stdout == b""
        assert res.stderr.decode().startswith(f"Error: refusing to write {target}: it is inside mnemon's data folder")
    assert registration.read_bytes() == before and not (pair.client / "data" / "team" / "draft.json").exists()


@pytest.mark.parametrize("args", [
    ["show", "no-such-id"], ["remember", "--imp", "9", "x"], ["recall", "--limit", "0", "q"], ["link", "a"],
    ["remember"], ["import", "/no/such/draft.json"], ["recall", "--brief", "--verbose", "q"], ["forget", "nope"],
    ["search", "--nope", "x"], ["--readonly", "remember", "read only refuses writes"],
])
def test_errors_are_the_local_errors(pair: Pair, args: list[str]) -> None:
    local, remote = pair.local(*args), pair.remote(*args)
    assert remote.returncode == local.returncode == 1
    assert remote.stderr == local.stderr and remote.stdout == local.stdout == b""


@pytest.mark.parametrize("args, shown", [
    (["doctor"], "doctor"), (["doctor", "--repair"], "doctor"), (["viz"], "viz"), (["gc", "--compact"], "gc --compact"),
    (["embed", "--status"], "embed"),
])
def test_commands_without_a_remote_form_say_so(pair: Pair, args: list[str], shown: str) -> None:
    proc = pair.remote(*args)
    assert proc.returncode == 1 and proc.stdout == b""
    assert proc.stderr.decode().startswith(f'Error: {shown} has no remote form: store "team" lives behind a mnemon '
                                           "gateway")
    assert not (pair.client / "data" / "team" / "mnemon.db").exists()


@pytest.mark.parametrize("args", [
    ["--embed-model", "all-minilm", "remember", "a note under another model"],
    ["remember", "a note under another model", "--embed-model=all-minilm"],
    ["--embed-model", "all-minilm", "recall", "note"],
])
def test_embed_model_is_refused_on_a_remote_store_and_nothing_is_stored(pair: Pair, args: list[str]) -> None:
    before = json.loads(pair.local("--readonly", "status").stdout)["total_insights"]
    proc = pair.remote(*args)
    assert (proc.returncode, proc.stdout) == (1, b"")
    assert proc.stderr.decode() == ('Error: --embed-model has no remote form: store "team" embeds with its '
                                    "gateway's model (set MNEMON_EMBED_MODEL where the gateway runs)\n")
    assert json.loads(pair.local("--readonly", "status").stdout)["total_insights"] == before


def test_the_other_global_flags_reach_the_gateway_side_command(pair: Pair, tmp_path: Path) -> None:
    """--readonly travels (the gateway runs the command read-only), --store and --data-dir pick the registration
    wherever they stand on the line, --version answers locally."""
    before = json.loads(pair.local("--readonly", "status").stdout)["total_insights"]
    refused = pair.remote("remember", "written under readonly", "--readonly")
    assert refused.returncode == 1 and refused.stderr == pair.local("--readonly", "remember", "x").stderr
    assert json.loads(pair.local("--readonly", "status").stdout)["total_insights"] == before
    other = tmp_path / "elsewhere"  # an empty data dir: "team" named with --store in it is not registered
    mnemon(other, "store", "create", "solo")
    made = mnemon(pair.client, "remember", "picked by --store after the command", "--store", "team",
                  env={"MNEMON_TOKEN": pair.token})
    assert json.loads(made.stdout)["action"] == "added"
    seen = pair.local("--readonly", "search", "picked by --store after the command")
    assert b"picked by --store after the command" in seen.stdout
    proc = mnemon(other, "--store", "solo", "status")  # --data-dir elsewhere: a local store, not the gateway's
    assert json.loads(proc.stdout)["db_path"].startswith(str(other))
    version = pair.remote("--version")
    assert version.returncode == 0 and version.stdout.startswith(b"mnemon")


def test_setup_style_store_open_and_store_copy_refuse_a_remote_store(pair: Pair) -> None:
    proc = mnemon(pair.client, "store", "copy", "team", "other", check=False)
    assert proc.returncode == 1 and b"store copy has no remote form" in proc.stderr


def test_token_problems_are_one_error_line(pair: Pair) -> None:
    proc = mnemon(pair.client, "status", check=False)  # no MNEMON_TOKEN at all
    assert proc.returncode == 1
    assert proc.stderr.decode() == 'Error: store "team" lives behind a mnemon gateway: set MNEMON_TOKEN to its token\n'
    proc = pair.remote("status", token="mnemon_wrong")
    assert proc.returncode == 1
    assert proc.stderr.decode() == ('Error: the mnemon gateway for store "team" refused the request (401): '
                                    "unknown token\n")
    proc = pair.remote("remember", "x", token=pair.reader)
    assert proc.returncode == 1 and b"(403): token \"hook\" is read-only" in proc.stderr


def test_an_unreachable_gateway_is_an_error_within_two_seconds(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = tmp_path / "c"
    mnemon(client, "store", "create", "far", "--remote", f"http://127.0.0.1:{port}/mcp")
    started = time.monotonic()
    proc = mnemon(client, "--store", "far", "recall", "anything", env={"MNEMON_TOKEN": "t"}, check=False)
    assert time.monotonic() - started < 2.0 + 1.5  # the 2 s connect budget plus the interpreter's start-up
    assert proc.returncode == 1
    assert proc.stderr.decode().startswith('Error: cannot reach the mnemon gateway for store "far": ')
    assert proc.stderr.decode().count("\n") == 1


def test_the_stdio_mcp_server_remembers_on_a_remote_store(pair: Pair) -> None:
    """``mnemon mcp serve`` on a client whose store lives behind a gateway: remember (the one tool the stdio
    server ran on its own engine) goes to the gateway's remember tool with its arguments as they came, like
    every other tool; under --readonly it is refused on this side. A line nested past the JSON parser's
    depth is a parse error, and the session goes on."""
    def rpc(k: int, method: str, params: dict) -> str:
        return json.dumps({"jsonrpc": "2.0", "id": k, "method": method, "params": params})

    remember = {"name": "remember", "arguments": {"content": "Billing retries back off for ninety seconds",
                                                  "category": "decision", "tags": ["billing"],
                                                  "entities": ["Billing, Inc."]}}
    lines = [
        rpc(1, "initialize", {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t"}}),
        "[" * 5000 + "]" * 5000,
        rpc(2, "tools/call", remember),
        rpc(3, "tools/call", {"name": "recall", "arguments": {"query": "billing retries"}}),
    ]
    served = pair.remote("mcp", "serve", stdin=("\n".join(lines) + "\n").encode())
    assert served.returncode == 0 and b"Traceback" not in served.stderr, served.stderr
    replies = [json.loads(line) for line in served.stdout.decode().splitlines()]
    assert [r.get("id") for r in replies] == [1, None, 2, 3]
    assert replies[1]["error"]["code"] == -32700
    assert replies[2]["result"]["isError"] is False, replies[2]
    stored = json.loads(replies[2]["result"]["content"][0]["text"])
    shown = json.loads(pair.local("--readonly", "show", stored["id"]).stdout)
    assert (shown["content"], shown["tags"], shown["entities"]) == (
        "Billing retries back off for ninety seconds", ["billing"], ["Billing, Inc."])
    assert stored["id"] in replies[3]["result"]["content"][0]["text"]
    refused = pair.remote("--readonly", "mcp", "serve", stdin=(rpc(4, "tools/call", remember) + "\n").encode())
    reply = json.loads(refused.stdout.decode().splitlines()[0])["result"]
    assert reply["isError"] is True
    assert reply["content"][0]["text"] == "Error: remember is unavailable with --readonly: database writes are disabled"


def test_a_silent_gateway_is_cut_off_at_two_seconds(tmp_path: Path) -> None:
    """A port that accepts nothing (a full backlog stands in for a black-holed address): connect times out."""
    from mnemon.errors import StoreError
    from mnemon.gateway import remote
    from mnemon.store.registration import RemoteRegistration

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(0)
        port = sock.getsockname()[1]
        fillers = []
        for _ in range(8):  # fill the accept queue so the next SYN is dropped
            f = socket.socket()
            f.setblocking(False)
            f.connect_ex(("127.0.0.1", port))
            fillers.append(f)
        started = time.monotonic()
        with pytest.raises(StoreError) as raised:
            remote.post(RemoteRegistration("far", f"http://127.0.0.1:{port}/mcp", "T"), b"{}", "t")
        elapsed = time.monotonic() - started
        for f in fillers:
            f.close()
    assert elapsed < 2.5
    assert str(raised.value).startswith('cannot reach the mnemon gateway for store "far"') or \
        "did not answer" in str(raised.value)


def test_a_gateway_that_accepts_and_never_answers_is_cut_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A wedged gateway (the connection accepted, no answer) held every command, a hook's recall included,
    for ANSWER_TIMEOUT (600 s); a memory command now waits COMMAND_ANSWER_TIMEOUT (30 s; 1 s here), the long
    ones (import, export, gc) keep the long budget."""
    import threading

    from mnemon.cli import main
    from mnemon.gateway import remote

    assert remote.answer_timeout("recall") == remote.answer_timeout("remember") == remote.COMMAND_ANSWER_TIMEOUT
    assert remote.answer_timeout("import") == remote.answer_timeout("gc") == remote.ANSWER_TIMEOUT
    monkeypatch.setattr(remote, "COMMAND_ANSWER_TIMEOUT", 1.0)
    held: list[socket.socket] = []
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        port = server.getsockname()[1]

        def accept_and_hold() -> None:
            try:
                while True:
                    held.append(server.accept()[0])  # read nothing, answer nothing
            except OSError:
                return

        threading.Thread(target=accept_and_hold, daemon=True).start()
        data = tmp_path / "client"
        assert main(["--data-dir", str(data), "store", "create", "far", "--remote", f"http://127.0.0.1:{port}/mcp"]) == 0
        monkeypatch.setenv("MNEMON_TOKEN", "mnemon_not_checked")
        capsys.readouterr()
        started = time.monotonic()
        assert main(["--data-dir", str(data), "--store", "far", "recall", "anything"]) == 1
        elapsed = time.monotonic() - started
    for conn in held:
        conn.close()
    assert 0.9 < elapsed < 5, elapsed
    assert capsys.readouterr().err == ('Error: the mnemon gateway for store "far" did not answer: timed out '
                                       "(the command may or may not have run)\n")


def test_setup_on_a_remote_store_installs_the_hooks_and_creates_no_database(pair: Pair, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    proc = mnemon(pair.client, "setup", "--target", "claude-code", "--global", "--yes",
                  env={"HOME": str(home), "MNEMON_TOKEN": pair.token}, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().splitlines()[-1] == (
        f'mnemon ready: store "team" lives behind the mnemon gateway at {pair.gateway.url}/team')
    assert (home / ".claude").is_dir()
    assert not (pair.client / "data" / "team" / "mnemon.db").exists()
