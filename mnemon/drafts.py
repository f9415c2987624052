"""Import drafts: loading, validation and defaults (contract §3.15 with Decision 5).

Owns the draft format (``schema_version "1"``) and every message a bad draft produces. Nothing
here touches a store: ``load_draft`` turns bytes into a validated :class:`Draft` or raises
:class:`InputError` before anything is written, so a rejected draft never changes a store.

Messages: ``read file: …`` and ``parse JSON: …`` for loading; ``invalid draft: …`` for the rest,
with ``insights[i]: …`` / ``edges[i]: …`` naming the offending item. ``schema_version`` is checked
first. Defaults: category ``general``, importance 0 ⇒ 3, source = item ‖ draft ‖ ``import``,
``created_at`` parsed to UTC with second precision (absent ⇒ filled in by the engine with now),
explicit edge weight 0 ⇒ 0.5. Pure: stdlib only, no I/O beyond reading the named file.

Two additions that ``export`` writes, so that a store's edges come back as stored (a draft without them
reads as the contract says, and the Go program ignores them): ``exact_weights: true`` keeps an explicit
weight 0 as 0 (absent or null is still 0.5), and ``self_edges: [{index, edge_type, weight?, reason?, metadata?}]``
carries the links of an insight to itself, which ``link`` accepts (§3.8: only a self-``supersedes`` is
refused) and ``edges`` cannot hold (its two indexes must differ).

An insight may carry what ``export`` writes of its use: ``access_count`` (an integer from 0, absent ⇒ 0),
``last_accessed_at`` and ``updated_at`` (RFC 3339 like ``created_at``; absent ⇒ never accessed, and
``updated_at`` = ``created_at``), so that an imported export keeps each memory's immunity and effective
importance (§4.8) and ``show`` gives back what it gave.

An edge (in ``edges`` or ``self_edges``) may also carry ``metadata``, a JSON object of strings: the
edge's whole metadata map, as ``export`` writes it (an entity edge's ``entity``, a temporal edge's
``sub_type`` and ``hours_diff``, what ``link --meta`` was given, ...), stored as given. ``reason`` is
one key of that map: a non-empty ``reason`` beside ``metadata`` wins over ``metadata.reason`` (the
key the Go program reads is the one both programs store), an absent or empty one leaves the map's
as it is. An edge without ``metadata`` is stored with ``{"reason": ...}`` or ``{}``, as always.
"""

from __future__ import annotations

import json
import re
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import repeat
from operator import eq
from pathlib import Path
from typing import Any, NamedTuple, overload

from mnemon.errors import InputError, MnemonError
from mnemon.lifecycle import format_timestamp, parse_timestamp
from mnemon.validate import check_text, encodable as _encodable
from mnemon.records import (
    CATEGORIES,
    DEFAULT_CATEGORY,
    DEFAULT_IMPORTANCE,
    EDGE_TYPES,
    IMPORT_SOURCE,
    MAX_ACCESS_COUNT,
    MAX_CONTENT_BYTES,
    MAX_ENTITIES,
    MAX_ENTITY_BYTES,
    MAX_TAG_BYTES,
    MAX_TAGS,
)

__all__ = [
    "DRAFT_SCHEMA_VERSION", "DEFAULT_EDGE_WEIGHT", "Draft", "DraftEdge", "DraftInsight", "item_problem", "load_draft",
    "parse_draft",
]

DRAFT_SCHEMA_VERSION = "1"
DEFAULT_EDGE_WEIGHT = 0.5  # an explicit edge with weight 0 (or none) is written with 0.5 (§3.15)


@dataclass(frozen=True, slots=True)
class DraftInsight:
    """One validated draft item with the contract's defaults applied."""

    content: str
    category: str = DEFAULT_CATEGORY
    importance: int = DEFAULT_IMPORTANCE
    tags: list[str] = field(default_factory=list)
    entities: list[str] = field(default_factory=list)
    source: str = IMPORT_SOURCE
    created_at: str | None = None  # UTC, second precision; None ⇒ the import's "now"
    access_count: int = 0
    last_accessed_at: str | None = None  # (as created_at) None ⇒ never accessed
    updated_at: str | None = None  # (as created_at) None ⇒ created_at


Pairs = tuple[tuple[str, str], ...]
# What an edge's metadata is, as a draft's edges keep it: a reason (the whole map is {"reason": it},
# or {} for ""), the draft's only kind before ``metadata``; or the whole map as sorted pairs.
MetaLabel = str | Pairs


class DraftEdge(NamedTuple):
    """One validated explicit edge (index pair into the draft's insights; a tuple: a dense draft
    has millions, and a tuple is built in half the time of a frozen dataclass). ``metadata``: the
    edge's whole metadata map as sorted pairs (``reason`` among them) when it holds more than a
    reason; else () and ``reason`` is all of it."""

    source_index: int
    target_index: int
    edge_type: str
    weight: float
    reason: str = ""
    metadata: Pairs = ()

    @property
    def label(self) -> MetaLabel:
        return self.metadata or self.reason


def _edge_of(s: int, t: int, edge_type: str, w: float, label: MetaLabel) -> DraftEdge:
    if isinstance(label, str):
        return DraftEdge(s, t, edge_type, w, label)
    return DraftEdge(s, t, edge_type, w, dict(label).get("reason", ""), label)


class DraftEdges(Sequence[DraftEdge]):
    """A draft's explicit edges column by column, read back as :class:`DraftEdge` tuples.

    A dense draft has dozens of edges per insight (16M at 1M insights): as tuples they took
    about 160 bytes each, in these arrays about 21.
    """

    __slots__ = ("_source", "_target", "_type", "_weight", "_meta", "_metas", "_meta_ids")

    def __init__(self) -> None:
        self._source = array("l")
        self._target = array("l")
        self._type = array("b")
        self._weight = array("d")
        self._meta = array("l")  # each edge's metadata, as a code into ``_metas``
        self._metas: list[MetaLabel] = [""]  # each distinct metadata once (MetaLabel)
        self._meta_ids: dict[MetaLabel, int] = {"": 0}

    def append(self, edge: DraftEdge) -> None:
        self._source.append(edge.source_index)
        self._target.append(edge.target_index)
        self._type.append(_EDGE_TYPE_CODE[edge.edge_type])
        self._weight.append(edge.weight)
        self._meta.append(self._meta_code(edge.label))

    def extend_plain(self, items: list[Any], n: int, exact: bool = False) -> bool:
        """Append every edge of ``items`` when each is plainly valid (as ``_plain_edge`` judges one),
        column by column; else append none and return False (the caller then goes item by item,
        which phrases the error). A dense draft has dozens of edges per insight: checked a field
        at a time over the whole slice, in C loops, they cost a tenth of one call per edge."""
        if not items:
            return True
        if set(map(type, items)) != {dict}:
            return False
        field = _field
        source, target = field(items, "source_index"), field(items, "target_index")
        if set(map(type, source)) != {int} or set(map(type, target)) != {int}:
            return False  # (bool is not int here: type(True) is bool)
        if min(source) < 0 or min(target) < 0 or max(source) >= n or max(target) >= n or any(map(eq, source, target)):
            return False
        kinds = field(items, "edge_type")
        if set(map(type, kinds)) != {str}:
            return False
        if not _EDGE_TYPE_SET.issuperset(kinds):
            return False
        codes = list(map(_EDGE_TYPE_CODE.__getitem__, kinds))
        weights = field(items, "weight")
        weight_types = set(map(type, weights))
        if not weight_types <= _WEIGHT_TYPES:
            return False
        if type(None) in weight_types:  # none given: the default (also under exact_weights)
            weights = [(DEFAULT_EDGE_WEIGHT if exact else 0) if w is None else w for w in weights]
        if min(weights) < 0 or max(weights) > 1:  # (a parsed number is never NaN: _reject_constant)
            return False
        if 0 in weights and not exact:
            weights = [float(w) or DEFAULT_EDGE_WEIGHT for w in weights]
        reasons = field(items, "reason")
        try:
            distinct = dict.fromkeys(reasons)  # first appearance order: the codes as item by item
        except TypeError:  # an unhashable reason (an array or object): not plain
            return False
        code_of: dict[Any, int] = {}
        for reason in distinct:
            if not reason:
                code_of[reason] = 0  # a falsy reason is none (``item.get("reason") or ""``)
            elif type(reason) is not str or "\x00" in reason or not _encodable(reason):
                return False
            else:
                code_of[reason] = self._meta_code(reason)
        maps = field(items, "metadata")
        if maps.count(None) == len(maps):  # a Go draft's edges: their reasons are their metadata
            metas = list(map(code_of.__getitem__, reasons))
        else:
            mapped = self._map_codes(reasons, maps, code_of)
            if mapped is None:
                return False
            metas = mapped
        self._source.extend(source)
        self._target.extend(target)
        self._type.extend(codes)
        self._weight.extend(weights)
        self._meta.extend(metas)
        return True

    def _map_codes(self, reasons: list[Any], maps: list[Any], code_of: dict[Any, int]) -> list[int] | None:
        """The metadata codes of edges some of which carry a ``metadata`` map (``reasons`` already
        checked plainly valid, ``code_of`` their codes); None if a map is not plainly valid. An
        export repeats few distinct maps (a backbone's two, an entity's name, a cosine's few
        thousand values), so each distinct (reason, map) is checked and labelled once."""
        seen: dict[tuple[Any, tuple[tuple[Any, Any], ...]], int] = {}
        out: list[int] = []
        for reason, given in zip(reasons, maps):
            if given is None:
                out.append(code_of[reason])
                continue
            if type(given) is not dict:
                return None
            key = (reason, tuple(given.items()))
            try:
                code = seen.get(key)
            except TypeError:  # an unhashable value (an array or object): not plain
                return None
            if code is None:
                if not all(type(v) is str for v in given.values()) or not all(map(_encodable, given)) or not all(
                    map(_encodable, given.values())
                ):
                    return None
                code = seen[key] = self._meta_code(_label(given, reason or ""))
            out.append(code)
        return out

    def _meta_code(self, label: MetaLabel) -> int:
        rid = self._meta_ids.get(label)
        if rid is None:
            rid = self._meta_ids[label] = len(self._metas)
            self._metas.append(label)
        return rid

    def __len__(self) -> int:
        return len(self._source)

    def clear(self) -> None:
        """Drop every edge (an import releases the columns once it holds its own copy)."""
        for name in ("_source", "_target", "_type", "_weight", "_meta"):
            setattr(self, name, array(getattr(self, name).typecode))
        self._metas = [""]
        self._meta_ids = {"": 0}

    def columns(self) -> tuple[array[int], array[int], array[int], array[float], array[int], list[MetaLabel]]:
        """The arrays the edges are kept in (not copies): source and target indexes, type codes
        (positions in ``EDGE_TYPES``), weights, metadata codes, and the metadata by code (MetaLabel)."""
        return self._source, self._target, self._type, self._weight, self._meta, self._metas

    def _edge(self, k: int) -> DraftEdge:
        return _edge_of(
            self._source[k], self._target[k], EDGE_TYPES[self._type[k]], self._weight[k], self._metas[self._meta[k]]
        )

    @overload
    def __getitem__(self, k: int) -> DraftEdge: ...
    @overload
    def __getitem__(self, k: slice) -> list[DraftEdge]: ...
    def __getitem__(self, k: int | slice) -> DraftEdge | list[DraftEdge]:
        if isinstance(k, slice):
            return [self._edge(i) for i in range(*k.indices(len(self)))]
        if k < 0:
            k += len(self)
        if not 0 <= k < len(self):
            raise IndexError("draft edge index out of range")
        return self._edge(k)

    def __iter__(self) -> Iterator[DraftEdge]:
        metas = self._metas
        for s, t, kind, w, m in zip(self._source, self._target, self._type, self._weight, self._meta):
            yield _edge_of(s, t, EDGE_TYPES[kind], w, metas[m])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True, slots=True)
class Draft:
    insights: list[DraftInsight]
    edges: Sequence[DraftEdge]


def _invalid(message: str) -> InputError:
    return InputError(f"invalid draft: {message}")


def load_draft(path: str, stdin_text: str | None = None) -> Draft:
    """Read a draft from ``path`` (or ``stdin_text`` when ``path`` is ``-``) and validate it.

    A file is read as a stream (:func:`_stream_draft`) when it is a well-formed, valid draft in
    the usual key order; anything else is parsed whole by :func:`parse_draft`, which then
    reports the error exactly as it always did.
    """
    if path == "-" and stdin_text is not None:
        return parse_draft(stdin_text)
    draft = _stream_draft(path)
    return draft if draft is not None else parse_draft(read_draft_text(path))


_STREAM_BLOCK = 1 << 20  # characters read at a time
# Characters parsed at a time as one array (_Stream.slices): a few hundred objects, whose memory
# is reused slice after slice (slicing a whole block, a 100k draft's parse peaked 19 MB higher), as fast.
_SLICE_CHARS = 1 << 16
_WHITESPACE = " \t\n\r"  # what the json module skips between tokens


class _Fallback(Exception):
    """The streamed draft is not the plain case: parse it whole (which phrases any error)."""


class _Stream:
    """JSON values read one by one from a text file through a buffer of about one block."""

    def __init__(self, fh: Any) -> None:
        self.fh = fh
        self.buf = ""
        self.pos = 0
        self.dropped = 0  # characters read and dropped before ``buf``
        self.eof = False
        self.decode = json.JSONDecoder(parse_constant=_reject_constant).raw_decode

    def _fill(self, grow: bool = False) -> bool:
        """Read the next block; ``grow``: at least as much as the buffer holds (a value longer
        than a block is then read in O(its length), not O(length squared))."""
        if self.eof:
            return False
        more = self.fh.read(max(_STREAM_BLOCK, len(self.buf) - self.pos) if grow else _STREAM_BLOCK)
        if not more:
            self.eof = True
            return False
        self.dropped += self.pos
        self.buf = self.buf[self.pos :] + more
        self.pos = 0
        return True

    def peek(self) -> str:
        """The next character that is not whitespace ('' at the end of the file)."""
        while True:
            buf, pos = self.buf, self.pos
            while pos < len(buf) and buf[pos] in _WHITESPACE:
                pos += 1
            self.pos = pos
            if pos < len(buf):
                return buf[pos]
            if not self._fill():
                return ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise _Fallback
        self.pos += 1

    def closed(self, close: str) -> bool:
        """After a container's element: True at its ``close`` character, False at a comma
        (either consumed); anything else is not the plain case."""
        nxt = self.peek()
        self.pos += 1
        if nxt == close:
            return True
        if nxt != ",":
            raise _Fallback
        return False

    def value(self) -> Any:
        """The next JSON value; one that ends at the buffer's end is read again with more text
        (a number could go on), as is one the buffer cuts."""
        self.peek()
        while True:
            try:
                value, end = self.decode(self.buf, self.pos)
            except ValueError:
                if self._fill(grow=True):
                    continue
                raise _Fallback from None
            if end == len(self.buf) and self._fill(grow=True):
                continue
            self.pos = end
            return value

    def slices(self) -> Iterator[list[Any]]:
        """The elements of the JSON array that comes next, a buffer's worth at a time.

        The buffer's text up to its last ``},`` is parsed as one array (``[`` + text + ``]``, one
        C call for thousands of objects). That cut is an element boundary exactly when the parse
        succeeds and ends where the text does: a cut inside a string leaves the string open, one
        inside a nested value leaves it unclosed. A cut past the array's end stops the parse at
        the array's own ``]``: what it parsed are the array's last elements. Where the cut is no
        boundary, elements are read one by one up to it, then slicing resumes.
        """
        self.expect("[")
        if self.peek() == "]":
            self.pos += 1
            return
        decode = self.decode
        hold = -1  # no slicing until past this absolute position (a cut that was no boundary)
        while True:
            if len(self.buf) - self.pos < _STREAM_BLOCK:
                self._fill()
            buf, pos = self.buf, self.pos
            if self.dropped + pos > hold:
                cut = buf.rfind("},", pos, pos + _SLICE_CHARS)
                if cut > pos:
                    text = f"[{buf[pos : cut + 1]}]"
                    try:
                        items, end = decode(text)
                    except (ValueError, RecursionError):
                        end = -1
                    if end == len(text):
                        self.pos = cut + 2
                        yield items
                        continue
                    if 0 < end < len(text) and items:  # stopped at the array's own ``]``: its last elements
                        self.pos = pos + end - 1
                        yield items
                        return
                    hold = self.dropped + cut
            yield [self.value()]
            if self.closed("]"):
                return


def _stream_draft(path: str) -> Draft | None:
    """The draft at ``path`` read as a stream, validated item by item as it arrives, so neither
    the file's text nor its parsed objects are ever held whole; None for anything but a valid
    draft whose ``schema_version`` and ``source`` come before ``insights``, ``insights`` before
    ``edges``, ``exact_weights`` before ``edges`` and ``self_edges`` after it, each key once (what
    ``export`` and the generators write)."""
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            return _walk(_Stream(fh))
    except (_Fallback, InputError, OSError, ValueError, RecursionError):
        return None  # UnicodeDecodeError is a ValueError


def _walk(stream: _Stream) -> Draft:
    stream.expect("{")
    seen: dict[str, Any] = {}
    insights: list[DraftInsight] | None = None
    edges = DraftEdges()
    if stream.peek() == "}":
        raise _Fallback
    while True:
        if stream.peek() != '"':
            raise _Fallback
        key = stream.value()
        stream.expect(":")
        if key in seen:
            raise _Fallback  # the last one wins in a whole parse
        if key == "insights":
            if seen.get("schema_version") != DRAFT_SCHEMA_VERSION or stream.peek() != "[":
                raise _Fallback
            source = seen.get("source")
            if source is not None and not isinstance(source, str):
                raise _Fallback
            default_source = _clean_text(source, "source") if source else IMPORT_SOURCE
            insights = []
            for items in stream.slices():
                insights += [_insight(i, item, default_source) for i, item in enumerate(items, len(insights))]
            seen[key] = None
        elif key == "edges":
            if insights is None or stream.peek() != "[" or "self_edges" in seen:
                raise _Fallback
            n, reasons = len(insights), dict[str, str]()
            exact = seen.get("exact_weights", False)
            if type(exact) is not bool:
                raise _Fallback
            for items in stream.slices():
                _add_edges(edges, items, n, reasons, exact)
            seen[key] = None
        else:
            if key == "source" and insights is not None:
                raise _Fallback  # the insights took their default source already
            if key == "exact_weights" and "edges" in seen:
                raise _Fallback  # the edges took their weights already
            seen[key] = stream.value()
        if stream.closed("}"):
            break
    if stream.peek() != "" or not insights:
        raise _Fallback
    for edge in _self_edges(seen.get("self_edges"), len(insights), _exact_weights(seen.get("exact_weights"))):
        edges.append(edge)
    return Draft(insights, edges)


def read_draft_text(path: str) -> str:
    """A draft file's text, or the contract's error (also what a remote store's import sends)."""
    try:
        raw = Path(path).read_bytes()
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise InputError(f"read file: {getattr(exc, 'strerror', None) or exc}: {path}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"parse JSON: invalid UTF-8 at byte {exc.start}") from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid number {name}")


def parse_draft(text: str) -> Draft:
    """Parse and validate draft JSON text; raise :class:`InputError` with the contract's message."""
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"parse JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(f"parse JSON: expected a JSON object, got {_kind(data)}")
    version = data.get("schema_version")
    if version != DRAFT_SCHEMA_VERSION:
        # the contract's quoted form for a string (or none); another JSON value as written, so the number 1
        # does not read as the string it should have been
        shown = f'"{version}"' if isinstance(version, str) else ('""' if version is None else json.dumps(version))
        raise _invalid(f'unsupported schema_version {shown} (expected "{DRAFT_SCHEMA_VERSION}")')
    draft_source = data.get("source")
    if draft_source is not None and not isinstance(draft_source, str):
        raise _invalid("source must be a string")
    items = data.get("insights")
    if items is None or items == []:
        raise _invalid("insights must not be empty")
    if not isinstance(items, list):
        raise _invalid("insights must be an array")
    default_source = _clean_text(draft_source, "source") if draft_source else IMPORT_SOURCE
    insights = [_insight(i, item, default_source) for i, item in enumerate(items)]
    raw_edges = data.get("edges")
    if raw_edges is None:
        raw_edges = []
    if not isinstance(raw_edges, list):
        raise _invalid("edges must be an array")
    exact = _exact_weights(data.get("exact_weights"))
    n = len(insights)
    reasons: dict[str, str] = {}
    edges = DraftEdges()
    for start in range(0, len(raw_edges), _EDGE_SLICE):
        _add_edges(edges, raw_edges[start : start + _EDGE_SLICE], n, reasons, exact)
    for edge in _self_edges(data.get("self_edges"), n, exact):
        edges.append(edge)
    return Draft(insights, edges)


_EDGE_SLICE = 8192  # a whole parse's edges checked at a time


def _add_edges(edges: DraftEdges, items: list[Any], n: int, reasons: dict[str, str], exact: bool = False) -> None:
    """Append the edges ``items`` (the next ones of the draft): the whole slice at once when every
    one is plainly valid, else one by one, which raises the first invalid edge's error."""
    if edges.extend_plain(items, n, exact):
        return
    for i, item in enumerate(items, len(edges)):
        edges.append(_plain_edge(item, n, reasons, exact) or _edge(i, item, n, exact))


def _kind(value: object) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean"}.get(type(value), "number" if isinstance(value, (int, float)) else "null")


def _clean_text(value: str, what: str) -> str:
    """validate.check_text, its message prefixed as a draft error."""
    try:
        return check_text(value, what)
    except InputError as exc:
        raise _invalid(str(exc)) from None


def _insight(index: int, item: object, default_source: str) -> DraftInsight:
    where = f"insights[{index}]"

    def bad(message: str) -> InputError:
        return _invalid(f"{where}: {message}")

    if not isinstance(item, dict):
        raise bad(f"must be an object, got {_kind(item)}")
    content = item.get("content")
    if content is None or (isinstance(content, str) and not content.strip()):
        raise bad("content is required")
    if not isinstance(content, str):
        raise bad("content must be a string")
    try:
        _clean_text(content, "content")
    except MnemonError as exc:
        raise bad(str(exc).removeprefix("invalid draft: ")) from None
    size = len(content.encode("utf-8"))
    if size > MAX_CONTENT_BYTES:
        raise bad(f"content too long ({size} bytes, max {MAX_CONTENT_BYTES})")

    category = item.get("category") or DEFAULT_CATEGORY
    if not isinstance(category, str) or category not in CATEGORIES:
        raise bad(f'invalid category "{category}"; valid: {", ".join(CATEGORIES)}')

    written = item.get("importance", 0)
    if written is None:
        written = 0
    if not _integral(written):
        raise bad(f"importance must be an integer, got {json.dumps(written)}")
    importance = int(written) or DEFAULT_IMPORTANCE
    if not 1 <= importance <= 5:
        raise bad(f"importance must be 1-5, got {json.dumps(written) if isinstance(written, float) else importance}")

    tags = _string_list(item.get("tags"), "tags", bad)
    if len(tags) > MAX_TAGS:
        raise bad(f"too many tags ({len(tags)}, max {MAX_TAGS})")
    for tag in tags:
        if len(tag.encode("utf-8")) > MAX_TAG_BYTES:
            raise bad(f"tag too long ({len(tag.encode('utf-8'))} bytes, max {MAX_TAG_BYTES}): {_prefix(tag)}")
    entities = _string_list(item.get("entities"), "entities", bad)
    if len(entities) > MAX_ENTITIES:
        raise bad(f"too many entities ({len(entities)}, max {MAX_ENTITIES})")
    for entity in entities:
        if len(entity.encode("utf-8")) > MAX_ENTITY_BYTES:
            raise bad(
                f"entity too long ({len(entity.encode('utf-8'))} bytes, max {MAX_ENTITY_BYTES}): {_prefix(entity)}"
            )

    source = item.get("source")
    if source is not None and not isinstance(source, str):
        raise bad("source must be a string")
    source = _clean_text(source, f"{where}: source") if source else default_source

    created_at = _stamp(item, "created_at", bad)
    # What export writes of an insight's use; most items have none of it (a draft of the Go program's never).
    accessed, last, updated = item.get("access_count"), item.get("last_accessed_at"), item.get("updated_at")
    if accessed is None and last is None and updated is None:
        return DraftInsight(content, category, importance, tags, entities, source, created_at)
    if accessed is None:
        accessed = 0
    if not _integral(accessed) or not 0 <= accessed <= MAX_ACCESS_COUNT:
        raise bad(f"access_count must be an integer from 0 to {MAX_ACCESS_COUNT}, got {json.dumps(accessed)}")
    return DraftInsight(
        content, category, importance, tags, entities, source, created_at,
        int(accessed), _stamp(item, "last_accessed_at", bad), _stamp(item, "updated_at", bad),
    )


def item_problem(item: dict[str, Any]) -> str | None:
    """What import's check says of one draft item, without its "invalid draft: insights[i]: " prefix; None
    when it passes (export asks this of every item it writes)."""
    try:
        _insight(0, item, IMPORT_SOURCE)
    except InputError as exc:
        return str(exc).removeprefix("invalid draft: insights[0]: ")
    return None


def _stamp(item: dict[str, Any], key: str, bad: Any) -> str | None:
    """An item's timestamp field: UTC with second precision, or None when absent (or empty)."""
    raw = item.get(key)
    if raw in (None, ""):
        return None
    if not isinstance(raw, str):
        raise bad(f"{key} must be an RFC 3339 string")
    try:
        return _canonical(raw) or format_timestamp(parse_timestamp(raw))
    except InputError:
        raise bad(f'{key} "{raw}" is not RFC 3339 (e.g. 2026-02-18T10:00:00Z)') from None


def _integral(value: object) -> bool:
    """A JSON number with an integer value (1 and 1.0; not true, 1.5, or 1e400, which JSON reads as infinity)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


_CANONICAL_STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", re.ASCII)


def _canonical(stamp: str) -> str | None:
    """``stamp`` itself when it is already UTC with second precision and a valid date-time (what
    ``format_timestamp(parse_timestamp(stamp))`` gives back then); None otherwise (parse it)."""
    if len(stamp) != 20 or _CANONICAL_STAMP.fullmatch(stamp) is None:
        return None
    try:
        datetime(int(stamp[:4]), int(stamp[5:7]), int(stamp[8:10]), int(stamp[11:13]), int(stamp[14:16]), int(stamp[17:19]))
    except ValueError:
        return None  # the full parser reports it
    return stamp


def _prefix(text: str) -> str:
    return text.encode("utf-8")[:50].decode("utf-8", errors="ignore")


def _string_list(value: object, what: str, bad: Any) -> list[str]:
    """A JSON array of strings, trimmed, empties dropped (as ``--tags`` / ``--entities`` are)."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise bad(f"{what} must be an array of strings")
    out: list[str] = []
    for v in value:
        v = v.strip()
        if v:
            try:
                _clean_text(v, what)
            except MnemonError as exc:
                raise bad(str(exc).removeprefix("invalid draft: ")) from None
            out.append(v)
    return out


_EDGE_TYPE_SET = frozenset(EDGE_TYPES)
# The parser makes a new string object for every occurrence of a value; a dense draft repeats five
# edge types and a few reasons over millions of edges, so its edges keep one object per distinct
# value instead (about 20 MB fewer for the 164k edges of a 10k-insight draft).
_EDGE_TYPE_OF = {t: t for t in EDGE_TYPES}
_EDGE_TYPE_CODE = {t: k for k, t in enumerate(EDGE_TYPES)}
_REASONS_KEPT = 4096
_WEIGHT_TYPES = frozenset({int, float, type(None)})


def _field(items: list[dict[str, Any]], key: str) -> list[Any]:
    """``[item.get(key) for item in items]`` in one C loop."""
    return list(map(dict.get, items, repeat(key)))


def _plain_edge(item: object, n: int, reasons: dict[str, str], exact: bool = False) -> DraftEdge | None:
    """The edge of a plainly valid item (integer indexes in range, a known type, a weight in
    [0, 1] or none, a clean reason string or none, no metadata map), else None: ``_edge`` then
    validates it field by field and phrases the error. A dense draft has dozens of edges per
    insight: they are most of its parsing."""
    if type(item) is not dict:
        return None
    source, target, edge_type = item.get("source_index"), item.get("target_index"), item.get("edge_type")
    if type(source) is not int or type(target) is not int or type(edge_type) is not str:
        return None
    if not (0 <= source < n and 0 <= target < n) or source == target or edge_type not in _EDGE_TYPE_SET:
        return None
    weight = item.get("weight")
    if weight is None:
        weight = DEFAULT_EDGE_WEIGHT
    if (type(weight) is not float and type(weight) is not int) or not 0.0 <= weight <= 1.0:
        return None
    if item.get("metadata") is not None:
        return None  # (``_edge`` validates the map)
    reason = item.get("reason") or ""
    if reason:
        if type(reason) is not str or "\x00" in reason or not _encodable(reason):
            return None
        reason = reasons.setdefault(reason, reason) if len(reasons) < _REASONS_KEPT else reason
    return DraftEdge(source, target, _EDGE_TYPE_OF[edge_type], _weight(weight, exact), reason)


def _edge(index: int, item: object, n: int, exact: bool = False) -> DraftEdge:
    where = f"edges[{index}]"

    def bad(message: str) -> InputError:
        return _invalid(f"{where}: {message}")

    if not isinstance(item, dict):
        raise bad(f"must be an object, got {_kind(item)}")
    ends: list[int] = []
    for key in ("source_index", "target_index"):
        value = item.get(key)
        if value is None:
            raise bad(f"{key} is required")
        if not _integral(value):
            raise bad(f"{key} must be an integer")
        if not 0 <= value < n:
            raise bad(f"{key} {int(value)} out of range [0,{n})")
        ends.append(int(value))
    if ends[0] == ends[1]:
        raise bad("source_index and target_index must differ")
    edge_type = item.get("edge_type")
    if not isinstance(edge_type, str) or edge_type not in EDGE_TYPES:
        raise bad(f'invalid edge type "{edge_type if edge_type is not None else ""}"; valid: {", ".join(EDGE_TYPES)}')
    return _edge_of(ends[0], ends[1], edge_type, *_weight_and_metadata(item, bad, where, exact))


def _weight(weight: float, exact: bool) -> float:
    """An edge's stored weight: 0 is the default 0.5 (§3.15), unless the draft says its weights are exact."""
    return float(weight) if exact else float(weight) or DEFAULT_EDGE_WEIGHT


def _weight_and_metadata(item: dict[str, Any], bad: Any, where: str, exact: bool) -> tuple[float, MetaLabel]:
    weight = item.get("weight")
    if weight is None:
        weight = DEFAULT_EDGE_WEIGHT
    if isinstance(weight, bool) or not isinstance(weight, (int, float)):
        raise bad("weight must be a number")
    if not 0.0 <= weight <= 1.0:
        raise bad(f"weight must be between 0.0 and 1.0, got {weight:.2f}")
    reason = item.get("reason") or ""
    if not isinstance(reason, str):
        raise bad("reason must be a string")
    reason = _clean_text(reason, f"{where}: reason")
    given = item.get("metadata")
    if given is None:
        return _weight(weight, exact), reason
    if not isinstance(given, dict):
        raise bad(f"metadata must be an object of strings, got {_kind(given)}")
    for key, value in given.items():
        if not isinstance(value, str):
            raise bad(f"metadata[{json.dumps(key)}] must be a string, got {_kind(value)}")
        if not (_encodable(key) and _encodable(value)):
            raise bad(f"metadata[{json.dumps(key)}] is not valid UTF-8")
    return _weight(weight, exact), _label(given, reason)


def _label(given: dict[str, str], reason: str) -> MetaLabel:
    """The metadata of an edge whose draft gives the map ``given`` and the reason ``reason``: a
    non-empty reason wins over the map's (it is what the Go program reads and stores). A map that
    is only a non-empty reason (or nothing) is labelled as a reason-only edge is.

    A map's values may hold a NUL (``link --meta`` takes one; the stored JSON escapes it), its
    ``reason`` included: only the ``reason`` beside it is plain text, as for every draft."""
    if reason:
        given = {**given, "reason": reason}
    if not given:
        return ""
    if len(given) == 1 and given.get("reason"):
        return given["reason"]
    return tuple(sorted(given.items()))


def _self_edges(value: object, n: int, exact: bool) -> list[DraftEdge]:
    """The draft's ``self_edges``: links of an insight to itself (``export`` writes them; ``edges`` cannot
    hold one), each ``{index, edge_type, weight?, reason?, metadata?}``, validated as an edge is."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise _invalid("self_edges must be an array")
    out: list[DraftEdge] = []
    for k, item in enumerate(value):
        where = f"self_edges[{k}]"

        def bad(message: str, where: str = where) -> InputError:
            return _invalid(f"{where}: {message}")

        if not isinstance(item, dict):
            raise bad(f"must be an object, got {_kind(item)}")
        index = item.get("index")
        if index is None:
            raise bad("index is required")
        if not _integral(index):
            raise bad("index must be an integer")
        if not 0 <= index < n:
            raise bad(f"index {int(index)} out of range [0,{n})")
        edge_type = item.get("edge_type")
        if not isinstance(edge_type, str) or edge_type not in EDGE_TYPES:
            raise bad(f'invalid edge type "{edge_type if edge_type is not None else ""}"; valid: {", ".join(EDGE_TYPES)}')
        if edge_type == "supersedes":
            raise bad("supersedes requires distinct insights")
        out.append(_edge_of(int(index), int(index), edge_type, *_weight_and_metadata(item, bad, where, exact)))
    return out


def _exact_weights(value: object) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise _invalid("exact_weights must be true or false")
    return value
