"""Hostile input through the real command line: derandomised hypothesis over the command grammar.

Every example builds an argv from the grammar of the commands that exist (remember, show,
forget, link, related, gc, status, log, receipt, store, doctor) and mutates it: invalid UTF-8
(``os.fsdecode`` surrogate escapes, as a shell hands undecodable bytes to Python), NUL, control
and bidi characters, huge strings, numbers at and past their bounds, malformed ``--meta`` JSON,
LIKE metacharacters, SQL fragments, traversal and reserved store names, unknown flags, and
arbitrary stdin bytes for ``remember -``. It runs in-process through ``mnemon.cli.main`` against
its own copy of a small seeded store and asserts the error contract (§3.1):

- the exit status is 0 or 1 and nothing raises (no traceback);
- on 1, stderr is exactly one line starting with ``Error: `` and the store is unchanged
  (same write generation and row counts: no partial write);
- no file appears outside the data directory (cwd and HOME stay empty).

CI runs ``FUZZ_EXAMPLES`` (2,000) examples, about 45 s on 2 cores; ``MNEMON_RELIABILITY_SCALE=N`` multiplies it.
"""

from __future__ import annotations

import io
import os
import shutil
import sys
from pathlib import Path

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SCALE = max(1, int(os.environ.get("MNEMON_RELIABILITY_SCALE", "1")))
FUZZ_EXAMPLES = 2000 * SCALE

# --- atoms ------------------------------------------------------------------------------------

_HOSTILE_TEXT = [
    "", " ", "\x00", "a\x00b", "\t\n\r", "\x1b[31mred\x1b[0m", "\x7f\x08", "\u202eevil\u202c", "\u2066x\u2069",
    "\ufeffbom", "\u200b", "%", "_", "%_\\", "a%b_c", "'", '"', "\\", "'; DROP TABLE insights;--",
    "\" OR 1=1 --", "../../etc/passwd", "/etc/passwd", "~", "$(touch pwned)", "`id`", "${HOME}", "*", "-",
    "--", "-x", "--bogus", "--imp", "--cat=", "=", "é" * 3000, "x" * 8000, "x" * 8001, "€" * 2667, "😀" * 2001,
    "\ud800", "NaN", "null", "{}", "[]",
]
_NUMBERS = [
    "-1", "0", "1", "2", "5", "6", "9", "10", "100", "1000", "1001", "-0", "0.0", "0.5", "1.0", "1.0000001",
    "-0.5", "2147483647", "2147483648", "-2147483649", "9223372036854775807", "9223372036854775808", "9" * 40,
    "nan", "NaN", "inf", "-inf", "1e308", "1e309", "1e-400", "0x10", "1_000", " 3", "3 ", "3.", ".5", "", "abc",
]
_META = [
    "{}", '{"k":"v"}', '{"k":1}', '{"k":null}', "[]", '"str"', "1", "null", "{", '{"a":', '{"a":"b",}',
    '{"\u0000":"x"}', '{"a":"' + "z" * 10000 + '"}', "[" * 5000 + "]" * 5000, '{"a":{"b":"c"}}', "NaN",
    '{"a":NaN}', '{"a":"\\ud800"}', "\xff", "{'a':'b'}",
]
_STORE_NAMES = [
    "default", "work", "w-2", "a_b", "..", ".", "../x", "a/b", "/abs", "", " ", "-x", "_x", "x y", "x\x00y",
    "CON", "nul", "a" * 300, "é", "x.db", ".hidden", "x\n", "\u202ex", "~", "$HOME", "a\\b", "*",
]
_CATEGORIES = ["preference", "decision", "fact", "insight", "context", "general", "narrative", "FACT", ""]
_EDGE_TYPES = ["temporal", "semantic", "causal", "entity", "supersedes", "backbone", "", "%"]
_ENTITY_MODES = ["merge", "provided", "auto", "none", ""]
_INTENTS = ["WHY", "WHEN", "ENTITY", "GENERAL", "why", "HOW", ""]
# Inputs for `import`: none of them may lead to a write outside the data dir.
_IMPORT_PATHS = ["-", "/dev/null", "/nonexistent/draft.json", ".", "..", "/", "/etc/passwd", "/proc/self/mem", ""]


def _undecodable() -> st.SearchStrategy[str]:
    """Bytes as a POSIX shell passes them: undecodable bytes become lone surrogates."""
    return st.binary(min_size=1, max_size=40).map(os.fsdecode)


def _text() -> st.SearchStrategy[str]:
    plain = st.text(alphabet=st.characters(codec="utf-8"), max_size=30)
    wild = st.text(max_size=30)  # includes surrogates and controls
    huge = st.sampled_from(["a", "é", "\x00", "%", " "]).flatmap(
        lambda c: st.integers(7990, 8010).map(lambda n: c * n)
    )
    return st.one_of(st.sampled_from(_HOSTILE_TEXT), plain, wild, _undecodable(), huge)


def _number() -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(_NUMBERS), st.integers(-(10**20), 10**20).map(str), st.floats().map(repr))


def _opt(flag: str, value: st.SearchStrategy[str]) -> st.SearchStrategy[list[str]]:
    return st.one_of(st.just([]), value.map(lambda v: [flag, v]), value.map(lambda v: [f"{flag}={v}"]))


def _ids(known: list[str]) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(known), st.sampled_from(known).map(lambda i: i[:8]), _text())


def _argv(known: list[str]) -> st.SearchStrategy[list[str]]:
    ids = _ids(known)
    words = st.lists(_text(), max_size=3)
    commands = {
        "remember": st.tuples(
            st.one_of(words, st.just(["-"])), _opt("--cat", st.one_of(st.sampled_from(_CATEGORIES), _text())),
            _opt("--imp", _number()), _opt("--tags", _text()), _opt("--entities", _text()),
            _opt("--entity-mode", st.one_of(st.sampled_from(_ENTITY_MODES), _text())), _opt("--source", _text()),
            st.sampled_from([[], ["--no-diff"]]),
        ),
        "show": st.tuples(st.lists(ids, max_size=2)),
        "forget": st.tuples(st.lists(ids, max_size=2)),
        "link": st.tuples(
            st.lists(ids, max_size=3), _opt("--type", st.one_of(st.sampled_from(_EDGE_TYPES), _text())),
            _opt("--weight", _number()), _opt("--meta", st.one_of(st.sampled_from(_META), _text())),
        ),
        "related": st.tuples(
            st.lists(ids, max_size=2), _opt("--edge", st.one_of(st.sampled_from(_EDGE_TYPES), _text())),
            _opt("--depth", _number()),
        ),
        "gc": st.tuples(
            _opt("--threshold", _number()), _opt("--limit", _number()), _opt("--keep", ids),
            st.sampled_from([[], ["--compact"]]),
        ),
        "status": st.tuples(st.just([])),
        "log": st.tuples(_opt("--limit", _number())),
        "receipt": st.tuples(_opt("--limit", _number())),
        "doctor": st.tuples(st.sampled_from([[], ["--repair"]])),
        "store": st.tuples(
            st.sampled_from([["list"], ["create"], ["set"], ["remove"], ["bogus"], []]),
            st.lists(st.one_of(st.sampled_from(_STORE_NAMES), _text()), max_size=2),
        ),
        "recall": st.tuples(
            words, _opt("--limit", _number()), _opt("--cat", st.one_of(st.sampled_from(_CATEGORIES), _text())),
            _opt("--source", _text()), _opt("--intent", st.one_of(st.sampled_from(_INTENTS), _text())),
            _opt("--excerpt-chars", _number()), st.sampled_from([[], ["--basic"], ["--verbose"], ["--brief"]]),
        ),
        "search": st.tuples(words, _opt("--limit", _number()), _opt("--excerpt-chars", _number()),
                            st.sampled_from([[], ["--brief"]])),
        "import": st.tuples(st.lists(st.one_of(st.sampled_from(_IMPORT_PATHS), _text()), max_size=2),
                            st.sampled_from([[], ["--dry-run"], ["--no-diff"]])),
        "export": st.tuples(st.just([])),
        "embed": st.tuples(st.lists(ids, max_size=2), st.sampled_from([[], ["--all"], ["--status"]])),
        "viz": st.tuples(_opt("--format", st.one_of(st.sampled_from(["dot", "html", "svg", ""]), _text()))),
        "bogus-command": st.tuples(words),
    }
    command = st.sampled_from(sorted(commands)).flatmap(
        lambda name: commands[name].map(lambda parts: [name] + [a for part in parts for a in part])
    )
    extras = st.lists(
        st.one_of(
            st.sampled_from(["--readonly", "--bogus", "-z", "--imp", "--", "--help"]),
            st.sampled_from(_STORE_NAMES).map(lambda n: f"--store={n}"),
        ),
        max_size=2,
    )
    return st.tuples(command, extras, st.integers(0, 10)).map(lambda t: _insert(t[0], t[1], t[2]))


def _insert(argv: list[str], extras: list[str], at: int) -> list[str]:
    pos = min(at, len(argv))
    return argv[:pos] + extras + argv[pos:]


# --- the store each example runs against ------------------------------------------------------


def _snapshot(db: Path) -> tuple[object, ...] | None:
    """Generation and row counts, read without creating side files; None when there is no database."""
    if not db.exists():
        return None
    conn = apsw.Connection(f"file:{db}?mode=ro&immutable=1", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    try:
        gen = conn.execute("SELECT value FROM mnemon_meta WHERE key = 'generation'").fetchone()
        counts = conn.execute(
            "SELECT (SELECT COUNT(*) FROM insights), (SELECT COUNT(*) FROM insights WHERE deleted_at IS NULL), "
            "(SELECT COUNT(*) FROM edges), (SELECT COUNT(*) FROM oplog)"
        ).fetchone()
        return (gen, *counts)
    finally:
        conn.close()


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A data dir with a few linked insights, built once; each example gets a copy."""
    from mnemon.cli import main

    base = tmp_path_factory.mktemp("fuzz-template") / "data-dir"
    os.environ["MNEMON_EMBED_ENDPOINT"] = "http://127.0.0.1:9"
    ids = []
    saved = sys.stdout
    sys.stdout = io.StringIO()
    try:
        for text in ("Alice prefers Python because of numba", "Go was chosen for the CLI", "100% of tests_pass"):
            assert main(["--data-dir", str(base), "remember", text]) == 0
            ids.append(sys.stdout.getvalue().split('"id": "')[-1].split('"')[0])
        assert main(["--data-dir", str(base), "link", ids[0], ids[1], "--type", "causal"]) == 0
    finally:
        sys.stdout = saved
    return base, ids


def _check_example(argv: list[str], stdin: bytes, base: Path, workdir: Path, home: Path, capsys) -> int:
    from mnemon.cli import main

    data_dir = workdir / "data-dir"
    if data_dir.exists():
        shutil.rmtree(data_dir)
    shutil.copytree(base, data_dir)
    db = data_dir / "data" / "default" / "mnemon.db"
    before = _snapshot(db)
    capsys.readouterr()
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    code = main(["--data-dir", str(data_dir), *argv])
    _out, err = capsys.readouterr()
    assert code in (0, 1), (argv, code, err)
    if code == 1:
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), (argv, err)
        assert _snapshot(db) == before, argv
    assert "Traceback" not in err
    # Nothing outside the data dir: the working directory holds only it, HOME stays empty.
    assert sorted(p.name for p in workdir.iterdir()) == ["data-dir"], argv
    assert not any(home.iterdir()), argv
    return code


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_hostile_argv_exits_0_or_1_with_one_error_line(
    template, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    base, ids = template
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(sys, "stdin", sys.stdin)  # restored after the test; examples replace it

    @settings(
        max_examples=FUZZ_EXAMPLES, derandomize=True, deadline=None, database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(argv=_argv(ids), stdin=st.one_of(st.just(b""), st.binary(max_size=64), st.just(b"\xff\xfe bad"),
                                            st.just(b"ok text from stdin")))
    def run(argv: list[str], stdin: bytes) -> None:
        _check_example(argv, stdin, base, workdir, home, capsys)

    run()


@pytest.mark.parametrize(
    "argv",
    [
        ["remember", "a\x00b"],
        ["remember", os.fsdecode(b"\xff\xfe")],
        ["remember", "x" * 8001],
        ["remember", "ok", "--imp", "6"],
        ["remember", "ok", "--imp", "9223372036854775808"],
        ["link", "a", "b", "--meta", "{"],
        ["link", "a", "b", "--weight", "nan"],
        ["related", "x", "--depth", "0"],
        ["gc", "--threshold", "nan"],
        ["gc", "--limit", "abc"],
        ["log", "--limit", "-1"],
        ["--store", "../x", "status"],
        ["remember", "ok", "--bogus"],
    ],
)
def test_known_hostile_inputs_fail_cleanly(argv: list[str], template, tmp_path: Path, monkeypatch, capsys) -> None:
    base = template[0]
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(sys, "stdin", sys.stdin)
    assert _check_example(argv, b"", base, workdir, home, capsys) == 1
