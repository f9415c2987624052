"""Tolerant JSON reading and comment-preserving edits of a host's JSON config, as text.

Hosts' config files are the user's: they hold ``//`` and ``/* */`` comments, trailing commas and,
for OpenClaw, JSON5 (unquoted keys, single-quoted strings, hex numbers, ``Infinity``). Re-serialising
such a file would drop all of that, so every edit here splices new text into the original and
leaves every other byte where it was. ``set``/``append`` and ``delete`` are inverses: inserting a
member and deleting it again gives back the original bytes for the layouts people write (one
member per line with any indent, trailing commas, trailing comments, and one-line objects), which
is what lets ``setup --eject`` restore a config byte for byte.

A parse keeps, for every value, its span in the text and, for containers, each member's span and
the position of the comma after it; an edit is a splice followed by a re-parse of the members it
touched, in the deepest container around it, while every other node's positions are shifted lazily
(``_Shifts``): a whole parse after each edit made install and eject of a 2.4 MB settings.json take
3.5 and 9 seconds, and now each parses the file once. ``JsoncError`` carries line and column; ``read`` turns it into an ``InputError`` that names
the file, before anything is written. stdlib only.
"""

from __future__ import annotations

import bisect
import json
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mnemon.errors import InputError
from mnemon.setup.files import read_config

__all__ = ["Document", "JsoncError", "loads", "read", "render"]

Key = str | int  # object key or array index
_IDENT_START = re.compile(r"[A-Za-z_$]")
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_NUMBER5 = re.compile(
    r"[+-]?(?:0[xX][0-9a-fA-F]+|Infinity|NaN|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
)
_BLANK = re.compile(r"[ \t\r\n\ufeff]*")
_BLANK5 = re.compile(r"[ \t\r\n\ufeff\v\f\u00a0\u2028\u2029]*")
_PLAIN = re.compile(r'[^"\\\x00-\x1f]*')  # what a JSON string's loop stopped at: its quote, "\\", a control character
_PLAIN5 = {q: re.compile("[^" + q + r"\\\n]*") for q in "\"'"}  # JSON5: the string's own quote, "\\", a newline
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_ESCAPES5 = {**_ESCAPES, "'": "'", "v": "\v", "0": "\0", "\n": "", "\r": "", "\u2028": "", "\u2029": ""}


class JsoncError(ValueError):
    """The text is not JSON (with comments, trailing commas, or JSON5 when allowed)."""

    def __init__(self, message: str, text: str, pos: int) -> None:
        line = text.count("\n", 0, pos) + 1
        col = pos - (text.rfind("\n", 0, pos) + 1) + 1
        super().__init__(f"{message} at line {line}, column {col}")
        self.line, self.col = line, col


class _Shifts:
    """The position shifts of a document's edits, one per generation: ``(hi, delta)`` moves every position at or
    after ``hi`` (in the text before that edit) by ``delta``. A node remembers the generation its positions were
    read in and catches up when it is next asked; so an edit shifts nothing eagerly, and the nodes after it (all
    of a 2 MB settings.json's, say) cost nothing until they are read."""

    __slots__ = ("edits",)

    def __init__(self) -> None:
        self.edits: list[tuple[int, int]] = []

    def move(self, pos: int, gen: int) -> int:
        for hi, delta in self.edits[gen:]:
            if pos >= hi:
                pos += delta
        return pos


class Member:
    """One object member or array element: where it starts (its key, for objects) and its comma."""

    __slots__ = ("key", "_start", "node", "_comma", "_gen", "_shifts")

    def __init__(self, key: Key, start: int, node: Node, shifts: _Shifts, gen: int) -> None:
        self.key, self._start, self.node = key, start, node
        self._comma: int | None = None
        self._shifts, self._gen = shifts, gen

    def _sync(self) -> None:
        gen = len(self._shifts.edits)
        if self._gen != gen:
            self._start = self._shifts.move(self._start, self._gen)
            if self._comma is not None:
                self._comma = self._shifts.move(self._comma, self._gen)
            self._gen = gen

    @property
    def start(self) -> int:
        self._sync()
        return self._start

    @property
    def comma(self) -> int | None:  # index of the ',' that follows the value, if any
        self._sync()
        return self._comma

    @property
    def end(self) -> int:
        return self.node.end


class Node:
    """A parsed value with its span ``[start, end)`` in the text."""

    __slots__ = ("kind", "_start", "_end", "value", "members", "_gen", "_shifts")

    def __init__(self, kind: str, start: int, end: int, value: Any, shifts: _Shifts, gen: int) -> None:
        self.kind = kind  # "object", "array" or "scalar"
        self._start, self._end, self.value = start, end, value
        self.members: list[Member] = []
        self._shifts, self._gen = shifts, gen

    def _sync(self) -> None:
        gen = len(self._shifts.edits)
        if self._gen != gen:
            self._start = self._shifts.move(self._start, self._gen)
            self._end = self._shifts.move(self._end, self._gen)
            self._gen = gen

    @property
    def start(self) -> int:
        self._sync()
        return self._start

    @property
    def end(self) -> int:
        self._sync()
        return self._end

    def child(self, key: Key) -> Member | None:
        if self.kind == "object" and isinstance(key, str):
            found = [m for m in self.members if m.key == key]
            return found[-1] if found else None  # duplicate keys: the last one wins, as in json.loads
        if self.kind == "array" and isinstance(key, int) and -len(self.members) <= key < len(self.members):
            return self.members[key]
        return None


class _Parser:
    def __init__(self, text: str, json5: bool, shifts: _Shifts | None = None) -> None:
        self.text, self.json5, self.n = text, json5, len(text)
        self.shifts = shifts if shifts is not None else _Shifts()
        self.gen = len(self.shifts.edits)  # the nodes made here hold positions in this text
        self.blank = _BLANK5 if json5 else _BLANK

    def fail(self, message: str, pos: int) -> JsoncError:
        return JsoncError(message, self.text, pos)

    def skip(self, i: int) -> int:
        """Index of the next character that is not whitespace or part of a comment."""
        text, n = self.text, self.n
        while True:
            i = self.blank.match(text, i).end()  # type: ignore[union-attr]  # (matches "" at worst); a run at a time: a character at a time was most of a parse
            if text.startswith("//", i):
                nl = text.find("\n", i)
                i = n if nl < 0 else nl + 1
            elif text.startswith("/*", i):
                close = text.find("*/", i + 2)
                if close < 0:
                    raise self.fail("unterminated comment", i)
                i = close + 2
            else:
                return i

    def document(self) -> Node | None:
        i = self.skip(0)
        if i == self.n:
            return None
        node = self.value(i)
        rest = self.skip(node.end)
        if rest != self.n:
            raise self.fail("unexpected text after the value", rest)
        return node

    def value(self, i: int) -> Node:
        if i >= self.n:
            raise self.fail("unexpected end of text", i)
        c = self.text[i]
        if c == "{":
            return self.container(i, "object", "}")
        if c == "[":
            return self.container(i, "array", "]")
        if c == '"' or (c == "'" and self.json5):
            end, value = self.string(i)
            return Node("scalar", i, end, value, self.shifts, self.gen)
        for word, literal in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(word, i):
                return Node("scalar", i, i + len(word), literal, self.shifts, self.gen)
        return self.number(i)

    def number(self, i: int) -> Node:
        match = (_NUMBER5 if self.json5 else _NUMBER).match(self.text, i)
        if not match or not match.group():
            raise self.fail(f"unexpected character {self.text[i]!r}", i)
        raw = match.group()
        body = raw.lstrip("+-")
        sign = -1 if raw.startswith("-") else 1
        if body == "Infinity":
            value: Any = sign * math.inf
        elif body == "NaN":
            value = math.nan
        elif body[:2] in ("0x", "0X"):
            value = sign * int(body, 16)
        elif re.fullmatch(r"[0-9]+", body):
            value = sign * int(body)
        else:
            value = sign * float(body)
        return Node("scalar", i, match.end(), value, self.shifts, self.gen)

    def string(self, i: int) -> tuple[int, str]:
        quote, text, n = self.text[i], self.text, self.n
        escapes = _ESCAPES5 if self.json5 else _ESCAPES
        out: list[str] = []
        j = i + 1
        plain = _PLAIN5[quote] if self.json5 else _PLAIN
        while True:
            k = plain.match(text, j).end()  # type: ignore[union-attr]  # up to the quote, a backslash or a control character
            out.append(text[j:k])
            if k >= n:
                raise self.fail("unterminated string", i)
            c = text[k]
            if c == quote:
                return k + 1, "".join(out)
            if c != "\\":
                raise self.fail("control character in string", k)
            esc = text[k + 1: k + 2]
            if esc == "u":
                digits = text[k + 2: k + 6]
                if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                    raise self.fail("bad \\u escape", k)
                out.append(chr(int(digits, 16)))
                j = k + 6
            elif esc == "x" and self.json5:
                digits = text[k + 2: k + 4]
                if not re.fullmatch(r"[0-9a-fA-F]{2}", digits):
                    raise self.fail("bad \\x escape", k)
                out.append(chr(int(digits, 16)))
                j = k + 4
            elif esc in escapes:
                out.append(escapes[esc])
                j = k + 2 + (1 if esc == "\r" and text[k + 2: k + 3] == "\n" else 0)
            elif self.json5 and esc and not esc.isdigit():
                out.append(esc)  # JSON5: any other escaped character stands for itself
                j = k + 2
            else:
                raise self.fail("bad escape", k)

    def key(self, i: int) -> tuple[int, str]:
        c = self.text[i] if i < self.n else ""
        if c == '"' or (c == "'" and self.json5):
            return self.string(i)
        if self.json5 and _IDENT_START.match(c):
            match = _IDENT.match(self.text, i)
            assert match is not None
            return match.end(), match.group()
        raise self.fail("expected a quoted key" if c else "unexpected end of text", i)

    def container(self, i: int, kind: str, close: str) -> Node:
        node = Node(kind, i, i, None, self.shifts, self.gen)
        node.members = self.members(node, self.skip(i + 1), close)
        if kind == "object":
            node.value = {m.key: m.node.value for m in node.members}
        else:
            node.value = [m.node.value for m in node.members]
        return node

    def members(self, node: Node, j: int, close: str, stop: int | None = None) -> list[Member]:
        """``node``'s members from ``j`` (just past its opening bracket or a comma) to its closing bracket, whose
        place becomes its end. With ``stop`` (an edit's local re-parse, ``Document._reparse``): only the members
        up to the one that now starts at ``stop``, or to the closing bracket if that is at ``stop``; the node is
        left as it is. A re-parse that does not land on ``stop`` raises ``_Resync``."""
        kind, i = node.kind, node._start
        found: list[Member] = []
        while True:
            if j >= self.n:
                raise self.fail(f"unclosed {kind}", i)
            if j == stop:
                return found
            if stop is not None and (j > stop or self.text[j] == close):
                raise _Resync
            if self.text[j] == close:
                node._end = j + 1
                return found
            start = j
            if kind == "object":
                j, key = self.key(j)
                j = self.skip(j)
                if j >= self.n or self.text[j] != ":":
                    raise self.fail("expected ':' after the key", j)
                value = self.value(self.skip(j + 1))
                member = Member(key, start, value, self.shifts, self.gen)
            else:
                value = self.value(j)
                member = Member(len(found), start, value, self.shifts, self.gen)
            found.append(member)
            j = self.skip(value._end)
            if j < self.n and self.text[j] == ",":
                member._comma = j
                j = self.skip(j + 1)
            elif j >= self.n or self.text[j] != close:
                raise self.fail(f"expected ',' or '{close}'", j)


def _reach(member: Member) -> int:
    """One past the member's comma, or past its value when it has none."""
    comma = member.comma
    return (member.end if comma is None else comma) + 1


class _Resync(Exception):
    """An edit's local re-parse did not meet the unchanged text where it expected to: parse the whole text."""


def parse(text: str, *, json5: bool = False) -> Node | None:
    """The value tree of ``text`` with spans; ``None`` for a text that is empty or only comments."""
    return _Parser(text, json5).document()


def loads(text: str, *, json5: bool = False) -> Any:
    """``json.loads`` that also takes comments and trailing commas (and JSON5 with ``json5=True``)."""
    root = parse(text, json5=json5)
    return None if root is None else root.value


def render(value: Any, indent: str = "  ", prefix: str = "") -> str:
    """``value`` as pretty JSON whose continuation lines start with ``prefix`` (the insertion's indent)."""
    return json.dumps(value, indent=indent, ensure_ascii=False).replace("\n", "\n" + prefix)


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def _own_line(text: str, pos: int) -> bool:
    """Nothing but indentation before ``pos`` on its line."""
    return text[_line_start(text, pos):pos].strip(" \t") == ""


class Document:
    """A JSON(C/5) text and edits that keep every byte they do not need to change.

    ``path`` arguments are sequences of object keys and array indices from the root.
    """

    def __init__(self, text: str = "", *, json5: bool = False) -> None:
        self.json5 = json5
        self.text = text
        self._parse_all()
        self.indent = self._detect_indent()
        self.newline = "\r\n" if "\r\n" in text else "\n"  # what we insert matches the file's line ends

    # -- reading -------------------------------------------------------------------------------
    @property
    def value(self) -> Any:
        return None if self.root is None else self.root.value

    def node(self, path: Sequence[Key]) -> Node | None:
        node = self.root
        for key in path:
            member = node.child(key) if node is not None else None
            if member is None:
                return None
            node = member.node
        return node

    def get(self, path: Sequence[Key], default: Any = None) -> Any:
        node = self.node(path)
        return default if node is None else node.value

    def _detect_indent(self) -> str:
        match = re.search(r"\n([ \t]+)\S", self.text)
        return match.group(1) if match else "  "

    # -- editing -------------------------------------------------------------------------------
    def _splice(self, edits: list[tuple[int, int, str]]) -> None:
        text = self.text
        # From the end backwards; at one position the edit listed later goes in first (lands after).
        order = sorted(range(len(edits)), key=lambda k: (edits[k][0], k), reverse=True)
        for start, end, new in (edits[k] for k in order):
            text = text[:start] + new + text[end:]
        lo, hi = min(e[0] for e in edits), max(e[1] for e in edits)
        delta = len(text) - len(self.text)
        self.text = text
        try:
            self._reparse(lo, hi, delta)
        except (_Resync, JsoncError, RecursionError):  # not a local edit after all: the whole text, as before
            self._parse_all()

    def _parse_all(self) -> None:
        parser = _Parser(self.text, self.json5)
        self.root = parser.document()
        self.shifts = parser.shifts

    def _reparse(self, lo: int, hi: int, delta: int) -> None:
        """Re-parse only the members that the edit of old ``[lo, hi)`` (now ``delta`` longer) touched, inside
        the deepest container around it; every other node keeps its place, its positions shifted lazily
        (``_Shifts``). Each edit re-parsed the whole text: on a 2.4 MB settings.json, install took 3.5 s and
        eject 9 s; the work per edit is now the edited container's members and the edit's own text."""
        container = self.root
        if container is None or not (container.start < lo and hi <= container.end - 1):
            raise _Resync
        while True:  # down to the deepest container whose brackets hold the edit
            members = container.members
            k = bisect.bisect_right(members, lo, key=lambda m: m.start) - 1
            inner = members[k].node if k >= 0 else None
            if inner is None or inner.kind == "scalar" or not (inner.start < lo and hi <= inner.end - 1):
                break
            container = inner
        members = container.members
        # The members the edit touched: from the first that reaches the edit (with its comma) to the last that
        # starts in it, both found by bisection (a member's reach and start grow along the list).
        first = bisect.bisect_right(members, lo, key=_reach)
        if first > 0 and members[first - 1].comma is None:  # a re-parse starts after a comma
            first -= 1
        last = max(first - 1, bisect.bisect_right(members, hi, key=lambda m: m.start) - 1)
        before = members[first - 1].comma if first > 0 else container.start
        assert before is not None
        after = members[last + 1:]
        # Where the unchanged text takes over again: the next untouched member, or the closing bracket.
        stop = (after[0].start if after else container.end - 1) + delta
        parser = _Parser(self.text, self.json5, self.shifts)
        parser.gen += 1  # the new members hold positions in the text after this edit
        fresh = parser.members(container, parser.skip(before + 1), "}" if container.kind == "object" else "]", stop)
        self.shifts.edits.append((hi, delta))
        container.members = members[:first] + fresh + after
        if container.kind == "array":
            for index in range(first, len(container.members)):
                container.members[index].key = index
        value = container.value
        if isinstance(value, dict):  # in place: every enclosing value holds this very object
            value.clear()
            value.update((m.key, m.node.value) for m in container.members)
        else:
            value[:] = [m.node.value for m in container.members]

    def _container(self, path: Sequence[Key], kind: str) -> Node:
        node = self.node(path)
        if node is None or node.kind != kind:
            raise JsoncError(f"{'.'.join(map(str, path)) or 'the top level'} is not an {kind}", self.text,
                             node.start if node else 0)
        return node

    def set(self, path: Sequence[Key], value: Any) -> None:
        """Set the value at ``path``, creating the missing objects on the way."""
        if not path:
            raise ValueError("empty path")
        if self.root is None:
            nested: Any = value
            for key in reversed(path):
                nested = {key: nested}
            # After a byte order mark, which readers accept only as the text's first character (VS Code's
            # jsonc, Python's utf-8-sig): put before it, our object made the file unreadable to them.
            bom = "\ufeff" if self.text.startswith("\ufeff") else ""
            self.text = bom + (render(nested, self.indent) + "\n").replace("\n", self.newline) + self.text[len(bom):]
            self._parse_all()
            return
        existing = self.node(path)
        if existing is not None:
            prefix = self.text[_line_start(self.text, existing.start):existing.start]
            indent = prefix[: len(prefix) - len(prefix.lstrip(" \t"))]
            self._splice([(existing.start, existing.end, self._lines(render(value, self.indent, indent)))])
            return
        depth = len(path) - 1
        while depth > 0 and self.node(path[:depth]) is None:
            depth -= 1
        nested = value
        for key in reversed(path[depth + 1:]):
            nested = {key: nested}
        self._insert(self._container(path[:depth], "object"), path[depth], nested)

    def append(self, path: Sequence[Key], value: Any) -> None:
        """Append ``value`` to the array at ``path``."""
        self._insert(self._container(path, "array"), None, value)

    def _insert(self, container: Node, key: str | int | None, value: Any) -> None:
        text = self.text
        label = "" if key is None else json.dumps(key, ensure_ascii=False) + ": "
        base = text[_line_start(text, container.start):container.start]
        base = base[: len(base) - len(base.lstrip(" \t"))]
        close = container.end - 1
        if not container.members:
            inner = text[container.start + 1:close]
            if inner.strip() == "":
                item = base + self.indent
                new = f"\n{item}{label}{render(value, self.indent, item)}\n{base}"
                self._splice([(container.start + 1, close, self._lines(new))])
            else:  # only comments inside: our member goes first, the comments stay after it
                item = base + self.indent
                new = f"\n{item}{label}{render(value, self.indent, item)}"
                self._splice([(container.start + 1, container.start + 1, self._lines(new))])
            return
        last = container.members[-1]
        trailing = last.comma is not None
        if _own_line(text, last.start):
            item = text[_line_start(text, last.start):last.start]
            after = last.comma + 1 if last.comma is not None else last.end
            eol = text.find("\n", after)
            rest = text[after:eol if eol >= 0 else len(text)]
            if eol >= 0 and eol < close and self._only_comments(rest):
                edits = [] if trailing else [(last.end, last.end, ",")]
                new = f"\n{item}{label}{render(value, self.indent, item)}" + ("," if trailing else "")
                at = eol - 1 if text[eol - 1] == "\r" else eol
                edits.append((at, at, self._lines(new)))
                self._splice(edits)
                return
        # One-line container (or the closing bracket shares the last member's line).
        compact = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
        if last.comma is not None:
            self._splice([(last.comma + 1, last.comma + 1, f" {label}{compact},")])
        else:
            self._splice([(last.end, last.end, f", {label}{compact}")])

    def _lines(self, new: str) -> str:
        return new if self.newline == "\n" else new.replace("\n", self.newline)

    def _only_comments(self, segment: str) -> bool:
        stripped = segment.strip(" \t\r")
        if not stripped:
            return True
        if stripped.startswith("//"):
            return True
        if stripped.startswith("/*") and stripped.endswith("*/") and "*/" not in stripped[2:-2]:
            return True
        return False

    def delete(self, path: Sequence[Key]) -> bool:
        """Remove the member or element at ``path`` (with its comma and line); False if absent."""
        if not path:
            raise ValueError("empty path")
        parent = self.node(path[:-1])
        member = parent.child(path[-1]) if parent is not None else None
        if parent is None or member is None or parent.kind == "scalar":
            return False
        self._splice(self._removal(parent, member))
        if parent.kind in ("object", "array"):
            fresh = self.node(path[:-1])
            if fresh is not None and not fresh.members:
                inner = self.text[fresh.start + 1:fresh.end - 1]
                if inner.strip() == "":  # the container is empty again: back to "{}" / "[]"
                    self._splice([(fresh.start + 1, fresh.end - 1, "")])
        return True

    def _removal(self, parent: Node, member: Member) -> list[tuple[int, int, str]]:
        text = self.text
        index = parent.members.index(member)
        prev = parent.members[index - 1] if index > 0 else None
        edits: list[tuple[int, int, str]] = []
        own_comma_end = member.comma + 1 if member.comma is not None else member.end
        if _own_line(text, member.start):
            eol = text.find("\n", own_comma_end)
            rest = text[own_comma_end:eol if eol >= 0 else len(text)]
            line = _line_start(text, member.start)
            if rest.strip(" \t\r") == "" and line > 0:
                edits.append((line - 2 if text[line - 2:line] == "\r\n" else line - 1, own_comma_end, ""))
                if member.comma is None and prev is not None and prev.comma is not None:
                    edits.append((prev.comma, prev.comma + 1, ""))
                return edits
        if member.comma is None:
            start = prev.comma if prev is not None and prev.comma is not None else member.start
            return [(start, member.end, "")]
        if member is parent.members[-1] and prev is not None and prev.comma is not None \
                and text[prev.comma + 1:member.start].strip(" \t") == "":
            # The last member of a one-line container with a trailing comma (`{"a": 1, "b": 2,}`): the blank
            # before it goes with it, as _insert put it there, so that insert and delete are inverses.
            return [(prev.comma + 1, member.comma + 1, "")]
        nxt = self._skip_blanks(member.comma + 1)
        return [(member.start, nxt, "")]

    def _skip_blanks(self, i: int) -> int:
        while i < len(self.text) and self.text[i] in " \t":
            i += 1
        return i

    def remove_items(self, path: Sequence[Key], predicate: Callable[[Any], bool]) -> int:
        """Delete every element of the array at ``path`` whose value satisfies ``predicate``."""
        node = self.node(path)
        if node is None or node.kind != "array":
            return 0
        doomed = [m.key for m in node.members if predicate(m.node.value)]
        for index in reversed(doomed):
            self.delete([*path, index])
        return len(doomed)


def read(path: Path, *, json5: bool = False) -> Document | None:
    """The config file as a ``Document``; ``None`` when it does not exist.

    A file that does not parse raises ``InputError`` naming it, so that nothing gets written.
    """
    text = read_config(path)
    if text is None:
        return None
    try:
        doc = Document(text, json5=json5)
    except JsoncError as exc:
        raise InputError(f"{path} is not valid JSON ({exc}); fix or move it, then run setup again") from None
    except RecursionError:  # the parser recurses per level: thousands of nested brackets
        raise InputError(f"{path} is nested too deeply to edit; fix or move it, then run setup again") from None
    if doc.root is not None and doc.root.kind != "object":
        raise InputError(f"{path} must hold a JSON object")
    return doc
