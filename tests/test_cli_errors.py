"""Bad input never hurts (contract §3.1, §3.3, Decision 9): each case prints exactly one line
``Error: <message>`` on stderr, exits 1, shows no traceback, prints nothing on stdout, and leaves
the store's files byte-identical (compared by SHA-256 of every file in the data dir).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, Result
from tests.gateway_server import store_dir

SEED = "Seeded memory about Rust services"


def snapshot(root: Path) -> dict[str, object]:
    """SHA-256 of every file under ``root`` (a new, vanished or changed file shows up), and every
    row of the default store when it lives in PostgreSQL."""
    from mnemon.store import registration
    from tests.test_cli_remember import stored_state

    files: dict[str, object] = {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*")) if p.is_file()
    }
    server = store_dir(root)
    if server != root / "data" / "default":  # a remote store: the files of the gateway's store too
        # except what a gateway's read-only call may add: it reads the live store through the WAL (not the CLI's
        # immutable snapshot), so an empty -wal and the -shm index of WAL readers can appear; any write shows up
        # in the database's bytes or as WAL content
        files.update({f"<gateway>/{p.relative_to(server)}": hashlib.sha256(p.read_bytes()).hexdigest()
                      for p in sorted(server.rglob("*")) if p.is_file() and not p.name.endswith("-shm")
                      and not (p.name.endswith("-wal") and p.stat().st_size == 0)})
    if registration.is_postgres(server):
        files["<postgres rows>"] = stored_state(root)
    return files


@pytest.fixture
def seeded(cli, data_dir: Path) -> dict:
    """A store with two insights (for commands that need real ids) and its byte snapshot."""
    first = cli.ok("remember", SEED, "--source", "a")
    second = cli.ok("remember", "Another memory entirely", "--source", "b")
    return {"ids": [first["id"], second["id"]], "before": snapshot(data_dir)}


def assert_one_line_error(res: Result, message: str | None = None) -> None:
    assert res.code == 1, (res.out, res.err)
    assert res.out == ""
    assert "Traceback" not in res.err
    assert res.err.startswith("Error: ") and res.err.endswith("\n") and res.err.count("\n") == 1, res.err
    if message is not None:
        assert res.err == f"Error: {message}\n"


TAGS_21 = ",".join(f"t{i}" for i in range(21))

CASES = [
    (["remember", "a" * 8001], "content too long (8001 chars, max 8000); consider chunking into multiple remember calls"),
    (["remember", "é" * 4001], "content too long (8002 chars, max 8000); consider chunking into multiple remember calls"),
    (["remember", "x", "--tags", TAGS_21], "too many tags (21, max 20)"),
    (["remember", "x", "--tags", "t" * 101], f"tag too long (101 chars, max 100): {'t' * 50}"),
    (["remember", "x", "--entities", ",".join(f"e{i}" for i in range(51))], "too many entities (51, max 50)"),
    (["remember", "x", "--imp", "0"], "importance must be 1-5, got 0"),
    (["remember", "x", "--imp", "6"], "importance must be 1-5, got 6"),
    (["remember", "x", "--cat", "narrative"],
     'invalid category "narrative"; valid: preference, decision, fact, insight, context, general'),
    (["remember", "x", "--entity-mode", "all"], 'invalid entity mode "all"; valid: merge, provided, auto'),
    (["remember", "a\x00b"], "content must not contain NUL bytes"),
    (["remember", "   "], "content must not be empty"),
    (["remember"], "requires at least 1 arg(s), only received 0"),
    (["remember", "x", "--imp", "abc"], None),
    (["remember", "x", "--bogus"], "unknown flag: --bogus"),
    (["remember", "x", "--cat"], None),
    (["frobnicate"], 'unknown command "frobnicate" for "mnemon"'),
    (["status", "--store", "../x"], 'invalid store name "../x"'),
    (["status", "--store", "a\n"], 'invalid store name "a\\n"'),
    (["remember", "x", "--store", ".hidden"], 'invalid store name ".hidden"'),
    (["store", "create", ""], 'invalid store name "": must match [a-zA-Z0-9][a-zA-Z0-9_-]*'),
    (["store", "create", "../x"], 'invalid store name "../x": must match [a-zA-Z0-9][a-zA-Z0-9_-]*'),
    (["store", "set", ".hidden"], 'invalid store name ".hidden": must match [a-zA-Z0-9][a-zA-Z0-9_-]*'),
    (["store", "remove", "a/b"], 'invalid store name "a/b": must match [a-zA-Z0-9][a-zA-Z0-9_-]*'),
    (["log", "--limit", "-1"], "--limit must be at least 1, got -1"),
    (["receipt", "--limit", "0"], "--limit must be at least 1, got 0"),
    (["gc", "--limit", "-3"], "--limit must be at least 1, got -3"),
    # inf and nan parse (as in Go) and are refused by the check, never printed as JSON null; an overflow is a parse error
    (["gc", "--threshold", "inf"], "--threshold must be a finite number, got inf"),
    (["gc", "--threshold", "1e+1000"],
     'invalid argument "1e+1000" for "--threshold" flag: strconv.ParseFloat: parsing "1e+1000": value out of range'),
    (["gc", "--threshold", "nan"], "--threshold must be a finite number, got nan"),
    (["gc", "--threshold", "-inf"], "--threshold must be non-negative, got -inf"),
    (["link", "a", "b", "--weight", "inf"], "weight must be between 0.0 and 1.0, got inf"),
    (["link", "a", "b", "--weight", "nan"], "weight must be between 0.0 and 1.0, got nan"),
    # a float flag reads as Go's (pflag: strconv.ParseFloat): Python's float() took a space, another script's
    # digits and "1_0", and read "1e400" as inf
    (["link", "a", "b", "--weight", " 0.5"],
     'invalid argument " 0.5" for "--weight" flag: strconv.ParseFloat: parsing " 0.5": invalid syntax'),
    (["link", "a", "b", "--weight", "٠.5"],
     'invalid argument "٠.5" for "--weight" flag: strconv.ParseFloat: parsing "٠.5": invalid syntax'),
    (["gc", "--threshold", "1_0"], 'invalid argument "1_0" for "--threshold" flag: strconv.ParseFloat: parsing "1_0": invalid syntax'),
    (["gc", "--threshold", "1e400"],
     'invalid argument "1e400" for "--threshold" flag: strconv.ParseFloat: parsing "1e400": value out of range'),
    (["link", "a", "b", "--weight", "abc"], 'invalid argument "abc" for "--weight" flag: strconv.ParseFloat: parsing "abc": invalid syntax'),
    # a 20-digit int: --excerpt-chars is refused as --limit is (int64, as Go's flag parse), --brief or not
    (["recall", "x", "--limit", "9" * 20], f'invalid argument "{"9" * 20}" for "--limit" flag: strconv.ParseInt: parsing "{"9" * 20}": value out of range'),
    (["search", "x", "--limit", "9" * 20], f'invalid argument "{"9" * 20}" for "--limit" flag: strconv.ParseInt: parsing "{"9" * 20}": value out of range'),
    (["recall", "x", "--brief", "--excerpt-chars", "9" * 20],
     f'invalid argument "{"9" * 20}" for "--excerpt-chars" flag: strconv.ParseInt: parsing "{"9" * 20}": value out of range'),
    (["recall", "x", "--excerpt-chars", "9" * 20],
     f'invalid argument "{"9" * 20}" for "--excerpt-chars" flag: strconv.ParseInt: parsing "{"9" * 20}": value out of range'),
    (["recall", "x", "--basic", "--brief", "--excerpt-chars", "-" + "9" * 20],
     f'invalid argument "-{"9" * 20}" for "--excerpt-chars" flag: strconv.ParseInt: parsing "-{"9" * 20}": value out of range'),
    (["search", "x", "--brief", "--excerpt-chars", "9" * 20],
     f'invalid argument "{"9" * 20}" for "--excerpt-chars" flag: strconv.ParseInt: parsing "{"9" * 20}": value out of range'),
    # --depth and --imp are int flags too: a depth past int64 was run as given, an importance got "must be 1-5"
    (["related", "ghost", "--depth", "9" * 20], f'invalid argument "{"9" * 20}" for "--depth" flag: strconv.ParseInt: parsing "{"9" * 20}": value out of range'),
    (["related", "ghost", "--depth", "-" + "9" * 20],
     f'invalid argument "-{"9" * 20}" for "--depth" flag: strconv.ParseInt: parsing "-{"9" * 20}": value out of range'),
    (["remember", "x", "--imp", "9" * 20], f'invalid argument "{"9" * 20}" for "--imp" flag: strconv.ParseInt: parsing "{"9" * 20}": value out of range'),
    # an int flag reads as Go's (pflag: strconv.ParseInt base 0): ASCII only, no space. Python's int() took a
    # space and another script's digit; more than 4,300 digits were its own ValueError
    (["recall", "x", "--limit", " 2"], 'invalid argument " 2" for "--limit" flag: strconv.ParseInt: parsing " 2": invalid syntax'),
    (["recall", "x", "--limit", "٣"], 'invalid argument "٣" for "--limit" flag: strconv.ParseInt: parsing "٣": invalid syntax'),
    (["search", "x", "--limit", "1__000"], 'invalid argument "1__000" for "--limit" flag: strconv.ParseInt: parsing "1__000": invalid syntax'),
    (["log", "--limit", "08"], 'invalid argument "08" for "--limit" flag: strconv.ParseInt: parsing "08": invalid syntax'),
    (["log", "--limit", "0x"], 'invalid argument "0x" for "--limit" flag: strconv.ParseInt: parsing "0x": invalid syntax'),
    (["log", "--limit", "0x8000000000000000"],
     'invalid argument "0x8000000000000000" for "--limit" flag: strconv.ParseInt: parsing "0x8000000000000000": value out of range'),
    (["recall", "x", "--limit", "a\nb"], 'invalid argument "a\\nb" for "--limit" flag: strconv.ParseInt: parsing "a\\nb": invalid syntax'),
    (["receipt", "--limit", ""], 'invalid argument "" for "--limit" flag: strconv.ParseInt: parsing "": invalid syntax'),
    (["gc", "--limit", "2 "], 'invalid argument "2 " for "--limit" flag: strconv.ParseInt: parsing "2 ": invalid syntax'),
    (["remember", "x", "--imp", "٣"], 'invalid argument "٣" for "--imp" flag: strconv.ParseInt: parsing "٣": invalid syntax'),
    (["related", "ghost", "--depth", "1_"], 'invalid argument "1_" for "--depth" flag: strconv.ParseInt: parsing "1_": invalid syntax'),
    (["recall", "x", "--brief", "--excerpt-chars", "+1.5"], 'invalid argument "+1.5" for "--excerpt-chars" flag: strconv.ParseInt: parsing "+1.5": invalid syntax'),
    (["recall", "x", "--limit", "9" * 5000], f'invalid argument "{"9" * 5000}" for "--limit" flag: strconv.ParseInt: parsing "{"9" * 5000}": value out of range'),
    (["show", "00000000-0000-4000-8000-000000000000"], "insight 00000000-0000-4000-8000-000000000000 not found"),
    (["show"], "accepts 1 arg(s), received 0"),
    (["forget", "ghost"], "forget: insight ghost not found or already deleted"),
    (["related", "ghost"], "insight not found: ghost"),
    (["gc", "--keep", "ghost"], "insight ghost not found"),
    (["link", "ghost", "ghost2"], "source insight ghost not found"),
    (["remember", "x", "--readonly"], "remember is unavailable with --readonly: database writes are disabled"),
]


@pytest.mark.parametrize(("args", "message"), CASES, ids=[" ".join(a)[:40] for a, _ in CASES])
def test_bad_input_is_one_line_and_changes_nothing(cli, data_dir: Path, seeded: dict, args, message) -> None:
    res = cli(*args)
    assert_one_line_error(res, message)
    assert snapshot(data_dir) == seeded["before"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--weight", "1.5"], "weight must be between 0.0 and 1.0, got 1.50"),
        (["--type", "bogus"], 'invalid edge type "bogus"; valid: temporal, semantic, causal, entity, supersedes'),
        (["--meta", "{not json"], None),
    ],
)
def test_bad_link_changes_nothing(cli, data_dir: Path, seeded: dict, extra, message) -> None:
    res = cli("link", *seeded["ids"], *extra)
    assert_one_line_error(res, message)
    assert snapshot(data_dir) == seeded["before"]


@pytest.mark.local_only  # a remote store refuses any gc --compact first: it has no remote form
def test_gc_keep_and_compact_together_are_refused(cli, data_dir: Path, seeded: dict) -> None:
    """--compact was silently dropped and the --keep ran (the access bump changed the store): both are now
    refused before the store is opened, whichever flag comes first."""
    kept = seeded["ids"][0]
    for args in (["gc", "--compact", "--keep", kept], ["gc", "--keep", kept, "--compact"]):
        assert_one_line_error(cli(*args), "--keep and --compact cannot be used together")
    assert snapshot(data_dir) == seeded["before"]
    # --threshold and --limit shape gc's suggestions only; with --compact they were silently ignored
    for args, message in ((["gc", "--compact", "--limit", "3"], "--compact and --limit cannot be used together"),
                          (["gc", "--threshold", "0.2", "--compact"], "--compact and --threshold cannot be used together")):
        assert_one_line_error(cli(*args), message)
    assert snapshot(data_dir) == seeded["before"]


@pytest.mark.parametrize("extra, message", [
    (["--threshold", "0.9"], "--keep and --threshold cannot be used together"),
    (["--limit", "5"], "--keep and --limit cannot be used together"),
    (["--threshold=0.5"], "--keep and --threshold cannot be used together"),  # the default's value, given: still asked
    (["--limit", "0"], "--keep and --limit cannot be used together"),  # the combination, before the value
    (["--limit", "5", "--threshold", "0.1"], "--keep and --threshold cannot be used together"),
])
def test_gc_keep_with_suggestion_flags_is_refused(cli, data_dir: Path, seeded: dict, extra, message) -> None:
    """gc --keep ID --threshold/--limit ran the keep (+3 accesses) and silently ignored the suggestion flags,
    which only shape gc's candidate list (§3.10): now one error line and nothing changed, whatever the order."""
    kept = seeded["ids"][0]
    for args in (["gc", "--keep", kept, *extra], ["gc", *extra, "--keep", kept]):
        assert_one_line_error(cli(*args), message)
    assert snapshot(data_dir) == seeded["before"]
    assert cli.ok("gc", "--keep", kept)["new_access"] == 3  # alone, it keeps


def test_imp_abc_and_missing_value_use_cobra_wording(cli, seeded) -> None:
    assert cli("remember", "x", "--imp", "abc").err == (
        'Error: invalid argument "abc" for "--imp" flag: strconv.ParseInt: parsing "abc": invalid syntax\n')
    assert cli("remember", "x", "--cat").err == "Error: flag needs an argument: --cat\n"


def run_raw(argv: list[bytes], data_dir: Path, stdin: bytes | None = None) -> Result:
    """Run a whole process with raw bytes in argv (the OS passes them through undecoded)."""
    # MNEMON_TOKEN kept: a remote test store's token (tests/conftest.py), which no local store reads
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMON_") or k == "MNEMON_TOKEN"}
    env["MNEMON_EMBED_ENDPOINT"] = "http://127.0.0.1:9"
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run(
        [sys.executable.encode(), b"-m", b"mnemon", b"--data-dir", str(data_dir).encode(), *argv],
        input=stdin, capture_output=True, env=env, timeout=60,
    )
    return Result(proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace"))


def test_invalid_utf8_in_argv_and_stdin(data_dir: Path, seeded: dict) -> None:
    res = run_raw([b"remember", b"bad \xff\xfe bytes"], data_dir)
    assert_one_line_error(res, "content is not valid UTF-8")
    res = run_raw([b"remember", b"-"], data_dir, stdin=b"piped \xc3\x28 invalid")
    assert_one_line_error(res, "content is not valid UTF-8")
    res = run_raw([b"remember", b"-"], data_dir, stdin=b"nul \x00 inside")
    assert_one_line_error(res, "content must not contain NUL bytes")
    res = run_raw([b"remember", b"ok", b"--tags", b"\xff"], data_dir)
    assert_one_line_error(res, "tag is not valid UTF-8")
    res = run_raw([b"show", b"\xff"], data_dir)
    assert_one_line_error(res, "id is not valid UTF-8")
    # a data directory SQLite cannot be given (its path is handed over as UTF-8): refused before it is made
    bad_dir = str(data_dir.parent).encode() + b"/\xff-data"
    for argv in ([b"--data-dir", bad_dir, b"status"], [b"remember", b"ok", b"--data-dir=" + bad_dir]):
        res = run_raw(argv, data_dir)
        assert_one_line_error(res, "the data directory path is not valid UTF-8")
    assert not os.path.exists(bad_dir)
    assert snapshot(data_dir) == seeded["before"]


@pytest.mark.sqlite_only  # the entry point's own setting, with a data dir of its own: one backend is enough
def test_an_invalid_server_setting_is_said_and_read_as_auto(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMON_")}
    env.update(PYTHONPATH=str(REPO), MNEMON_SERVER="bogus", XDG_RUNTIME_DIR=str(tmp_path / "run"))
    (tmp_path / "run").mkdir()
    proc = subprocess.run([sys.executable, "-m", "mnemon", "--version"], capture_output=True, text=True, env=env,
                          timeout=60, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith("mnemon version ")
    assert proc.stderr == 'mnemon: ignoring invalid MNEMON_SERVER "bogus"; using auto\n'
    env["MNEMON_SERVER"] = ""  # empty is unset (auto), as for the other variables: nothing said
    proc = subprocess.run([sys.executable, "-m", "mnemon", "--version"], capture_output=True, text=True, env=env,
                          timeout=60, cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (0, "") and proc.stdout.startswith("mnemon version ")


@pytest.mark.sqlite_only  # a shell around the entry point, with a data dir of its own: one backend is enough
def test_a_closed_standard_stream_is_no_traceback(data_dir: Path, tmp_path: Path) -> None:
    """A caller that closed stdin or stdout (``<&-``, ``>&-``): Python leaves the stream None, and every read
    or write was an AttributeError traceback. A closed input reads as empty, a closed output takes nothing,
    as the Go program ignores its failed writes."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMON_")}
    env.update(PYTHONPATH=str(REPO), MNEMON_SERVER="off", MNEMON_EMBED_ENDPOINT="http://127.0.0.1:9")
    mnemon = f"{sys.executable} -m mnemon --data-dir {tmp_path / 'own'}"

    def shell(line: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["sh", "-c", line], capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path)

    res = shell(f"{mnemon} remember - <&-")
    assert (res.returncode, res.stderr) == (1, "Error: content must not be empty\n")
    res = shell(f"{mnemon} remember 'written with stdout closed' >&-")
    assert (res.returncode, res.stderr) == (0, "")
    res = shell(f"{mnemon} status >&- 2>&-; echo rc=$?")
    assert res.stdout == "rc=0\n"
    res = shell(f"{mnemon} status")
    assert res.returncode == 0 and '"total_insights": 1' in res.stdout


def test_readonly_refusals_and_missing_database(cli, data_dir: Path, seeded: dict) -> None:
    a, b = seeded["ids"]
    for args, action in [
        (["forget", a], "forget"),
        (["link", a, b], "link"),
        (["gc"], "gc"),
        (["gc", "--keep", a], "gc"),
        (["gc", "--compact"], "gc --compact"),
        (["store", "create", "fresh"], "store create"),
    ]:
        res = cli("--readonly", *args)
        assert_one_line_error(res, f"{action} is unavailable with --readonly: database writes are disabled")
    missing = data_dir / "data" / "nothere" / "mnemon.db"
    assert_one_line_error(cli("--readonly", "--store", "nothere", "status"), f"database not found: {missing}")
    assert snapshot(data_dir) == seeded["before"]
    assert not missing.parent.exists()


@pytest.mark.sqlite_only  # the active file is the data dir's own, whatever the store's backend
def test_readonly_store_set_leaves_the_active_file_alone(cli, data_dir: Path) -> None:
    """store create, remove and copy were refused under --readonly while store set wrote the active file,
    which decides the store every later command writes to."""
    for name in ("main", "other"):
        assert cli("store", "create", name).code == 0
    assert cli("store", "set", "main").code == 0
    active = data_dir / "active"
    before, files = active.read_bytes(), snapshot(data_dir)
    res = cli("--readonly", "store", "set", "other")
    assert_one_line_error(res, "store set is unavailable with --readonly: database writes are disabled")
    assert active.read_bytes() == before == b"main\n"
    assert snapshot(data_dir) == files
    assert not (data_dir / ".active.tmp").exists()
    assert cli("store", "list").out == "* main\n  other\n"
    # an unknown store is still said to be unknown first, as store remove does
    assert_one_line_error(cli("--readonly", "store", "set", "nope"),
                          "store \"nope\" does not exist (use 'mnemon store create nope' first)")


@pytest.mark.in_process
def test_missing_stemmer_library_is_one_error_line(cli, data_dir: Path, seeded: dict,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A partial install without PyStemmer (an upgrade in place that skipped the new dependency) is a
    one-line error naming the library, never an ImportError traceback; nothing stored changes."""
    from mnemon import text

    monkeypatch.setitem(sys.modules, "Stemmer", None)  # ``import Stemmer`` now raises ImportError
    monkeypatch.delattr(text._ENGLISH, "stemmer", raising=False)
    text.stem.cache_clear()  # words stemmed earlier in this process would not reach the stemmer
    try:
        expected = "PyStemmer is not installed (recall's English stemmer): pip install PyStemmer, or reinstall mnemon"
        assert_one_line_error(cli("recall", "Rust services memories"), expected)
        assert_one_line_error(cli("remember", "Rust services run on three hosts"), expected)

        def stored(files: dict[str, object]) -> dict[str, object]:  # the derived index is rebuildable: not data
            return {name: digest for name, digest in files.items() if ".index/" not in name}

        assert stored(snapshot(data_dir)) == stored(seeded["before"])
    finally:
        monkeypatch.delitem(sys.modules, "Stemmer")
        text.stem.cache_clear()
    # the library back, the same store answers (the derived index the failed calls touched is sound)
    hits = cli.ok("recall", "Rust services memories")
    assert seeded["ids"][0] in [hit["id"] for hit in hits["results"]]
    assert cli.ok("status")["total_insights"] == 2


def test_an_int_flag_takes_a_sign_and_base_prefixes_as_go_does(cli, seeded) -> None:
    """pflag reads an int flag with strconv.ParseInt(s, 0, 64): "+2", "002" (octal), "0x2", "0b10", "0o2" and
    "0_2" are 2, as there (what it refuses is in CASES above)."""
    for args in (["log", "--limit", "+2"], ["log", "--limit=002"], ["log", "--limit", "0x2"], ["log", "--limit", "0b10"],
                 ["log", "--limit", "0o2"], ["log", "--limit", "0_2"]):
        res = cli(*args)
        assert res.code == 0 and len(res.out.splitlines()) == 2 + 2, res  # the header's two lines, then two rows


def test_every_number_option_reads_as_go_does() -> None:
    """Each int option of every command uses the Go-compatible type (cli.numflags), not click's INT (Python's int()),
    so a new option cannot bring back " 2" or "٣"."""
    from typer._click import types as click_types

    from mnemon.cli import _command
    from mnemon.cli.numflags import GoFloat, GoInt

    def options(command) -> list:  # type: ignore[no-untyped-def]
        found = list(command.params)
        for sub in getattr(command, "commands", {}).values():
            found += options(sub)
        return found

    params = options(_command())
    ints = [p for p in params if isinstance(p.type, (click_types.IntParamType, GoInt))]
    assert len(ints) >= 14  # --limit (5), --excerpt-chars (2), --imp, --depth, --expires, mcp serve's four
    assert [p.opts for p in ints if not isinstance(p.type, GoInt)] == []
    floats = [p for p in params if isinstance(p.type, (click_types.FloatParamType, GoFloat))]
    assert len(floats) >= 6  # --weight, --threshold, mcp serve's rate and three timeouts
    # (server stop --wait, mnemon's own with a lower bound, keeps click's FloatRange)
    assert [p.opts for p in floats if not isinstance(p.type, GoFloat)] == [["--wait"]]
