"""Tolerant JSON reading and comment-preserving edits of a host's JSON config, as text.

Hosts' config files are the user's: they hold ``//`` and ``/* */`` comments, trailing commas and,
for OpenClaw, JSON5 (unquoted keys, single-quoted strings, hex numbers, ``Infinity``). Re-serialising
such a file would drop all of that, so every edit here splices new text into the original and
leaves every other byte where it was. ``set``/``append`` and ``delete`` are inverses: inserting a
member and deleting it again gives back the original bytes for the layouts people write (one
member per line with any indent, trailing commas, trailing comments, and one-line objects), which
is what lets ``setup --eject`` restore a config byte for byte.

A parse keeps, for every value, its span in the text and, for containers, each member's span and
the position of the comma after it; an edit is a splice followed by a fresh parse (config files are
small). ``JsoncError`` carries line and column; ``read`` turns it into an ``InputError`` that names
the file, before anything is written. stdlib only.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
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
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_ESCAPES5 = {**_ESCAPES, "'": "'", "v": "\v", "0": "\0", "\n": "", "\r": "", "\u2028": "", "\u2029": ""}


class JsoncError(ValueError):
    """The text is not JSON (with comments, trailing commas, or JSON5 when allowed)."""

    def __init__(self, message: str, text: str, pos: int) -> None:
        line = text.count("\n", 0, pos) + 1
        col = pos - (text.rfind("\n", 0, pos) + 1) + 1
        super().__init__(f"{message} at line {line}, column {col}")
        self.line, self.col = line, col


@dataclass
class Member:
    """One object member or array element: where it starts (its key, for objects) and its comma."""

    key: Key
    start: int
    node: Node
    comma: int | None = None  # index of the ',' that follows the value, if any

    @property
    def end(self) -> int:
        return self.node.end


@dataclass
class Node:
    """A parsed value with its span ``[start, end)`` in the text."""

    kind: str  # "object", "array" or "scalar"
    start: int
    end: int
    value: Any = None
    members: list[Member] = field(default_factory=list)

    def child(self, key: Key) -> Member | None:
        if self.kind == "object" and isinstance(key, str):
            found = [m for m in self.members if m.key == key]
            return found[-1] if found else None  # duplicate keys: the last one wins, as in json.loads
        if self.kind == "array" and isinstance(key, int) and -len(self.members) <= key < len(self.members):
            return self.members[key]
        return None


class _Parser:
    def __init__(self, text: str, json5: bool) -> None:
        self.text, self.json5, self.n = text, json5, len(text)

    def fail(self, message: str, pos: int) -> JsoncError:
        return JsoncError(message, self.text, pos)

    def skip(self, i: int) -> int:
        """Index of the next character that is not whitespace or part of a comment."""
        text, n = self.text, self.n
        while i < n:
            c = text[i]
            if c in " \t\r\n\ufeff" or (self.json5 and c in "\v\f\u00a0\u2028\u2029"):
                i += 1
            elif text.startswith("//", i):
                nl = text.find("\n", i)
                i = n if nl < 0 else nl + 1
            elif text.startswith("/*", i):
                close = text.find("*/", i + 2)
                if close < 0:
                    raise self.fail("unterminated comment", i)
                i = close + 2
            else:
                break
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
            return Node("scalar", i, end, value)
        for word, literal in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(word, i):
                return Node("scalar", i, i + len(word), literal)
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
        return Node("scalar", i, match.end(), value)

    def string(self, i: int) -> tuple[int, str]:
        quote, text, n = self.text[i], self.text, self.n
        escapes = _ESCAPES5 if self.json5 else _ESCAPES
        out: list[str] = []
        j = i + 1
        while True:
            k = j
            while k < n and text[k] not in (quote, "\\", "\n") and (self.json5 or text[k] >= " "):
                k += 1
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
        node = Node(kind, i, i)
        j = self.skip(i + 1)
        while True:
            if j >= self.n:
                raise self.fail(f"unclosed {kind}", i)
            if self.text[j] == close:
                node.end = j + 1
                break
            start = j
            if kind == "object":
                j, key = self.key(j)
                j = self.skip(j)
                if j >= self.n or self.text[j] != ":":
                    raise self.fail("expected ':' after the key", j)
                value = self.value(self.skip(j + 1))
                member = Member(key, start, value)
            else:
                value = self.value(j)
                member = Member(len(node.members), start, value)
            node.members.append(member)
            j = self.skip(value.end)
            if j < self.n and self.text[j] == ",":
                member.comma = j
                j = self.skip(j + 1)
            elif j >= self.n or self.text[j] != close:
                raise self.fail(f"expected ',' or '{close}'", j)
        if kind == "object":
            node.value = {m.key: m.node.value for m in node.members}
        else:
            node.value = [m.node.value for m in node.members]
        return node


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
        self.root = parse(text, json5=json5)
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
        self.text = text
        self.root = parse(text, json5=self.json5)

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
            self.root = parse(self.text, json5=self.json5)
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
