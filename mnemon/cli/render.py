"""The only code that writes command results to stdout, in the Go program's JSON layout.

Go's encoder: two-space indent, ``"key": value``, raw UTF-8, ``<``, ``>``, ``&``, U+2028 and
U+2029 escaped as ``\\u003c``-style sequences (not in ``--brief`` output), integral floats without
``.0``, empty slices as ``[]``. Hooks parse ``"total_insights": <n>`` with sed, so the layout is
part of the contract (§3.1). Callers order dict keys: sorted for map-shaped outputs, field order
for struct-shaped ones.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator, Mapping, Sequence
from itertools import chain

_BASE_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_HTML_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"}
# Go escapes U+2028/U+2029 even when HTML escaping is off (JSONP safety).
_LINE_SEPARATORS = {"\u2028": "\\u2028", "\u2029": "\\u2029"}
# json.dumps writes \b and \f where Go writes \u0008 and \u000c; such strings take the slow path.
_GO_ONLY_ESCAPES = frozenset("\b\f")


def _string_slow(value: str, html: bool) -> str:
    out = ['"']
    for ch in value:
        esc = _BASE_ESCAPES.get(ch) or _LINE_SEPARATORS.get(ch)
        if esc is None and html:
            esc = _HTML_ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch < " ":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _string(value: str, html: bool) -> str:
    """Quote ``value`` as Go's encoder does; json.dumps (C speed) does the common case."""
    if not _GO_ONLY_ESCAPES.isdisjoint(value):
        return _string_slow(value, html)
    out = json.dumps(value, ensure_ascii=False)
    for table in (_LINE_SEPARATORS, _HTML_ESCAPES) if html else (_LINE_SEPARATORS,):
        for ch, esc in table.items():
            if ch in out:
                out = out.replace(ch, esc)
    return out


def format_float(value: float) -> str:
    """Format a float the way Go's encoding/json does (shortest repr, no ``.0``, ``e-7`` not ``e-07``)."""
    if math.isnan(value) or math.isinf(value):
        return "null"  # Go would fail; never let a NaN break a hook's parser
    if value == int(value) and abs(value) < 1e21:
        return str(int(value))
    absolute = abs(value)
    if absolute < 1e-6 or absolute >= 1e21:
        mantissa, exponent = f"{value:e}".split("e")
        text = repr(value)
        if "e" in text:  # repr is the shortest round-trip form, as Go's 'g' with precision -1
            mantissa, exponent = text.split("e")
        sign = exponent[0] if exponent[0] in "+-" else "+"
        digits = exponent.lstrip("+-").lstrip("0") or "0"
        return f"{mantissa}e{sign}{digits}"
    return repr(value)


def _encode(value: object, html: bool, indent: str | None, level: int, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(_string(value, html))
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(format_float(value))
    elif isinstance(value, Mapping):
        if not value:
            out.append("{}")
            return
        out.append("{")
        for i, (key, item) in enumerate(value.items()):
            if i:
                out.append(",")
            if indent is not None:
                out.append("\n" + indent * (level + 1))
            out.append(_string(str(key), html))
            out.append(": " if indent is not None else ":")
            _encode(item, html, indent, level + 1, out)
        if indent is not None:
            out.append("\n" + indent * level)
        out.append("}")
    elif isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        if not value:
            out.append("[]")
            return
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            if indent is not None:
                out.append("\n" + indent * (level + 1))
            _encode(item, html, indent, level + 1, out)
        if indent is not None:
            out.append("\n" + indent * level)
        out.append("]")
    else:
        raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def _has_float(value: object) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, Mapping):
        return any(_has_float(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_float(v) for v in value)
    return False


_SCALARS = frozenset({str, int, bool, type(None)})  # (floats never come here: _has_float)


def _flat(value: object) -> bool:
    """A non-empty list or dict of scalars only."""
    items = value.values() if type(value) is dict else value if type(value) is list else None
    return bool(items) and _SCALARS.issuperset(map(type, items))  # type: ignore[arg-type]


# Rows of a list of flat dicts encoded at a time: an import's output is built in pieces of this
# many results, not as one text copied three or four times over (90 MB above the results at 100k).
_ROWS_PER_PIECE = 4096


def _indentable(value: object) -> bool:
    """A dict of string keys whose values are scalars, flat containers (``_flat``) or lists of
    flat dicts (an import's 100k results): what ``_indented_pieces`` encodes."""
    if type(value) is not dict or not value or not all(type(k) is str for k in value):
        return False
    return all(
        type(item) in _SCALARS or item == [] or item == {} or _flat(item) or (type(item) is list and _flat_rows(item))
        for item in value.values()
    )


def _indented(value: object) -> str | None:
    """``json.dumps(value, indent=2, ensure_ascii=False)`` for an ``_indentable`` value, else None."""
    return "".join(_indented_pieces(value)) if _indentable(value) else None  # type: ignore[arg-type]


def _indented_pieces(value: dict[str, object]) -> Iterator[str]:
    """The text of ``json.dumps(value, indent=2, ensure_ascii=False)`` in pieces, for an
    ``_indentable`` value. Python's indenting encoder is pure Python, one generator step per
    value (1.1 s for the results of a 100k import); its compact C encoder is given the indented
    separators instead, ``",\n" + indent``, and the brackets of each flat container are then
    opened and closed on their own lines. That is exact: a string holds no raw newline, so
    ``},\n<indent>{`` can only be the boundary between two dicts of a list. A list of dicts is
    encoded ``_ROWS_PER_PIECE`` rows at a time, each piece joined to the last by that boundary.
    Pieces end outside any string literal."""
    yield "{"
    for i, (key, item) in enumerate(value.items()):
        yield f'{"," if i else ""}\n  {json.dumps(key, ensure_ascii=False)}: '
        if type(item) in _SCALARS or item == [] or item == {}:
            yield json.dumps(item, ensure_ascii=False)
        elif _flat(item):
            yield _flat_text(item, "  ")
        else:  # a non-empty list of flat dicts
            assert type(item) is list
            yield "[\n    {\n      "
            for start in range(0, len(item), _ROWS_PER_PIECE):
                rows = json.dumps(item[start : start + _ROWS_PER_PIECE], ensure_ascii=False, separators=(",\n      ", ": "))
                rows = rows[2:-2].replace("},\n      {", "\n    },\n    {\n      ")
                yield rows if not start else "\n    },\n    {\n      " + rows
            yield "\n    }\n  ]"
    yield "\n}"


def _flat_rows(rows: list[object]) -> bool:
    """A list of non-empty dicts of scalars only (C loops: 100k rows in a few milliseconds)."""
    return (
        set(map(type, rows)) == {dict} and all(rows)
        and _SCALARS.issuperset(map(type, chain.from_iterable(map(dict.values, rows))))  # type: ignore[arg-type]
    )


def _flat_text(value: object, indent: str) -> str:
    """A flat container (``_flat``) at ``indent``, as the indenting encoder writes it."""
    inner = indent + "  "
    text = json.dumps(value, ensure_ascii=False, separators=(",\n" + inner, ": "))
    return f"{text[0]}\n{inner}{text[1:-1]}\n{indent}{text[-1]}"


def _go_pieces(value: object, pretty: bool, html: bool) -> list[str] | None:
    """Go's text of ``value`` from the C json encoder, in pieces (an ``_indentable`` value's rows a
    piece at a time, anything else one piece), or None when the C encoder's text is not Go's.

    Without floats (Go prints ``1`` where Python prints ``1.0``) the layouts agree; the escapes Go
    adds can be applied piece by piece, because ``<``, ``>``, ``&``, U+2028 and U+2029 can only
    stand inside string literals there and pieces end outside them. ``\\b``/``\\f`` (Go:
    ``\\u0008``/``\\u000c``) fall back.
    """
    try:
        if pretty and _indentable(value):  # (never with a float: _SCALARS)
            pieces = list(_indented_pieces(value))  # type: ignore[arg-type]
        elif _has_float(value):
            return None
        else:
            pieces = [json.dumps(value, ensure_ascii=False, indent=2 if pretty else None, separators=None if pretty else (",", ":"))]
    except (TypeError, ValueError):
        return None
    if any(map(_go_escape_differs, pieces)):
        return None
    return [_go_escaped(piece, html) for piece in pieces]


def _go_escape_differs(text: str) -> bool:
    """The C encoder wrote an escape Go writes otherwise (``\\b``/``\\f``; a conservative test:
    an escaped backslash before a ``b`` matches too, and takes the slow path for nothing worse)."""
    return "\\b" in text or "\\f" in text


def _go_escaped(text: str, html: bool) -> str:
    """The C encoder's text with the escapes Go adds: they can only stand inside string literals."""
    for ch, esc in (*_LINE_SEPARATORS.items(), *(_HTML_ESCAPES.items() if html else ())):
        if ch in text:
            text = text.replace(ch, esc)
    return text


def to_json(value: object, *, pretty: bool = True, html_escape: bool = True) -> str:
    """Encode ``value`` as Go would: MarshalIndent(v, "", "  ") when pretty, Marshal otherwise."""
    pieces = _go_pieces(value, pretty, html_escape)
    if pieces is not None:
        return "".join(pieces)
    return to_json_reference(value, pretty=pretty, html_escape=html_escape)


def to_json_reference(value: object, *, pretty: bool = True, html_escape: bool = True) -> str:
    """The value-by-value encoder alone (tests compare the fast path with it)."""
    out: list[str] = []
    _encode(value, html_escape, "  " if pretty else None, 0, out)
    return "".join(out)


_WRITE_CHUNK = 1 << 20  # characters of a result written at once (at most this much text held twice)


def emit_json(value: object, *, pretty: bool = True, html_escape: bool = True) -> None:
    """Write ``value`` as JSON plus one trailing newline to stdout (``to_json``'s text), piece by
    piece: an import's output has a row per item, and its text is held once, not copied whole."""
    pieces = _go_pieces(value, pretty, html_escape)
    if pieces is None:
        pieces = [to_json_reference(value, pretty=pretty, html_escape=html_escape)]
    # Pieces are joined up to _WRITE_CHUNK characters, newline included: a result below that is
    # one write even on an unbuffered stdout (PYTHONUNBUFFERED), as the Go program writes it, so a
    # reader that stops at its first match (``| grep -q`` under ``pipefail``, as scripts written
    # for it do) never makes a later write fail with a broken pipe.
    write = sys.stdout.write
    held: list[str] = []
    size = 0
    for k, piece in enumerate(pieces):
        pieces[k] = ""  # each piece freed once written
        held.append(piece)
        size += len(piece)
        if size >= _WRITE_CHUNK:
            write("".join(held))
            held, size = [], 0
    held.append("\n")
    write("".join(held))


def emit_raw(text: str) -> None:
    """Write text exactly as given (a remote store's command output, already rendered by the gateway)."""
    sys.stdout.write(text)


def emit_text(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def table(rows: Sequence[Sequence[str]], padding: int = 2) -> str:
    """Align columns like Go's tabwriter with the given padding (last column not padded)."""
    widths = [0] * max((len(r) for r in rows), default=0)
    for row in rows:
        for i, cell in enumerate(row[:-1]):
            widths[i] = max(widths[i], len(cell))
    lines = []
    for row in rows:
        cells = [cell.ljust(widths[i] + padding) for i, cell in enumerate(row[:-1])]
        lines.append("".join(cells) + (row[-1] if row else ""))
    return "\n".join(lines) + "\n"
