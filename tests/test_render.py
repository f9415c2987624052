"""Go-compatible JSON rendering (contract §3.1): escapes, floats, layout."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from mnemon.cli.render import _string, _string_slow, format_float, to_json

TRICKY = st.text(alphabet=st.sampled_from(list("a é<>&\"\\\n\r\t\b\f\x01\x1f\x7f\u2028\u2029中/")), max_size=16)


@settings(max_examples=500, derandomize=True)
@given(TRICKY, st.booleans())
def test_fast_quoting_equals_the_character_by_character_reference(text: str, html: bool) -> None:
    assert _string(text, html) == _string_slow(text, html)
    assert json.loads(_string(text, html)) == text


def test_html_escapes_only_when_asked_but_line_separators_always() -> None:
    assert _string("<a>&\u2028", True) == '"\\u003ca\\u003e\\u0026\\u2028"'
    assert _string("<a>&\u2028", False) == '"<a>&\\u2028"'
    assert _string("\b\f\x01", True) == '"\\u0008\\u000c\\u0001"'


def test_floats_print_like_go() -> None:
    assert [format_float(x) for x in (1.0, 0.5, 1e-7, 3.0e21, 0.8123)] == ["1", "0.5", "1e-7", "3e+21", "0.8123"]


def test_layout_is_two_space_indent_with_empty_collections() -> None:
    assert to_json({"total_insights": 3, "a": [], "b": {}}) == '{\n  "total_insights": 3,\n  "a": [],\n  "b": {}\n}'
    assert to_json({"x": ["<"]}, pretty=False, html_escape=False) == '{"x":["<"]}'


_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), TRICKY)
_TREE = st.recursive(
    _LEAF,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(TRICKY, children, max_size=4)),
    max_leaves=20,
)


@settings(max_examples=400, derandomize=True)
@given(_TREE, st.booleans(), st.booleans())
def test_c_encoder_path_equals_the_reference_encoder(value: object, pretty: bool, html: bool) -> None:
    from mnemon.cli.render import to_json_reference

    assert to_json(value, pretty=pretty, html_escape=html) == to_json_reference(value, pretty=pretty, html_escape=html)


_FLAT = st.one_of(st.lists(_LEAF, max_size=3), st.dictionaries(TRICKY, _LEAF, max_size=3))
_RESULTS = st.dictionaries(
    TRICKY,
    st.one_of(_LEAF, _FLAT, st.lists(st.dictionaries(TRICKY, _LEAF, min_size=1, max_size=4), max_size=4), _TREE),
    max_size=5,
)


@settings(max_examples=600, derandomize=True)
@given(_RESULTS)
def test_indenting_with_the_c_encoder_equals_the_indenting_encoder(value: dict[str, object]) -> None:
    """The shapes ``_indented`` takes (an import's results: lists of flat dicts) come out as
    json.dumps(indent=2) writes them, including strings that look like its seams; others: None."""
    from mnemon.cli.render import _indented

    got = _indented(value)
    assert got is None or got == json.dumps(value, ensure_ascii=False, indent=2)
    results = {"imported": 2, "results": [{"index": k, "content": s, "action": "added"} for k, s in enumerate(["a},\n      {b", "c"])]}
    assert _indented(results) == json.dumps(results, ensure_ascii=False, indent=2)


@settings(max_examples=400, derandomize=True)
@given(_RESULTS, st.booleans(), st.integers(1, 3))
def test_emit_json_writes_to_jsons_text_piece_by_piece(value: dict[str, object], html: bool, rows_per_piece: int) -> None:
    """emit_json writes an indentable value in pieces (a list of dicts a few rows at a time): the
    bytes are to_json's, for values that take the fast path, the slow one (\\b, \\f) or neither."""
    import contextlib
    import io
    from unittest import mock

    from mnemon.cli import render

    with mock.patch.object(render, "_ROWS_PER_PIECE", rows_per_piece):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            render.emit_json(value, html_escape=html)
        assert out.getvalue() == render.to_json_reference(value, html_escape=html) + "\n"
        if render._indentable(value):
            assert "".join(render._indented_pieces(value)) == json.dumps(value, ensure_ascii=False, indent=2)


def test_a_long_result_list_is_written_in_pieces_equal_to_the_whole() -> None:
    """An import's results span several pieces; the text is the indenting encoder's, the pieces
    are bounded by the piece size (not the list), and a string that needs Go's slow escapes
    anywhere in the list sends the whole value down the reference path."""
    import contextlib
    import io
    from unittest import mock

    from mnemon.cli import render

    rows = [{"index": k, "id": f"id-{k}", "content": f"<item> {k} \u2028 中", "action": "added"} for k in range(23)]
    report = {"imported": 23, "updated": 0, "auto_pruned_ids": [], "results": rows}
    with mock.patch.object(render, "_ROWS_PER_PIECE", 5):
        pieces = list(render._indented_pieces(report))
        assert len(pieces) > 5 and max(map(len, pieces)) < len("".join(pieces)) / 3
        for html in (True, False):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                render.emit_json(report, html_escape=html)
            assert out.getvalue() == render.to_json_reference(report, html_escape=html) + "\n"
        rows[17]["content"] = "bell\b and feed\f"
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            render.emit_json(report)
        assert out.getvalue() == render.to_json_reference(report) + "\n"
        assert "\\u0008" in out.getvalue() and "\\u000c" in out.getvalue()


def test_a_result_is_one_write_with_its_newline() -> None:
    """A reader that stops at its first match (``mnemon status | grep -q`` under ``pipefail``, as
    the Go program's scripts run it) must not make a second write fail with a broken pipe, even on
    an unbuffered stdout: a result below the write chunk is one write, newline included."""
    import contextlib
    import io

    from mnemon.cli import render

    class Writes(io.StringIO):
        calls = 0

        def write(self, s: str) -> int:
            self.calls += 1
            return super().write(s)

    status = {"total_insights": 1, "by_category": {"general": 1}, "top_entities": [], "db_path": "/x/mnemon.db"}
    for value in [status] + [
        {"results": [{"insight": {"id": "a", "content": "x" * size}, "score": 0.5}], "intent": "WHY"}
        for size in (10, 20_000)
    ]:
        out = Writes()
        with contextlib.redirect_stdout(out):
            render.emit_json(value)
        assert out.calls == 1
        assert out.getvalue() == render.to_json_reference(value) + "\n"
    report = {"imported": 3000, "results": [{"index": k, "content": "y" * 1000} for k in range(3000)]}
    out = Writes()
    with contextlib.redirect_stdout(out):
        render.emit_json(report)  # about 3 MB: written a chunk at a time, never held whole twice
    assert 2 <= out.calls <= 4
    assert out.getvalue() == render.to_json_reference(report) + "\n"
