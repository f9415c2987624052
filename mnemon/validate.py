"""Input validation shared by remember, import and link (contract §3.3, §3.8, §3.15).

Runs before any database is opened, so a rejected input never changes a store. Messages are the
contract's, word for word; lengths are UTF-8 byte counts as in the Go program. stdlib only.

Also the RFC 3339 parser (``parse_timestamp``, which ``lifecycle`` re-exports): a draft's stamps are read
with it, and the store's doctor reads stored stamps with it (the store may import this module, no other
domain module).
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta, timezone

from mnemon.errors import InputError, go_quote
from mnemon.records import (
    CATEGORIES,
    EDGE_TYPES,
    ENTITY_MODES,
    MAX_CONTENT_BYTES,
    MAX_ENTITIES,
    MAX_ENTITY_BYTES,
    MAX_TAG_BYTES,
    MAX_TAGS,
)


def byte_prefix(text: str, n: int) -> str:
    """The first ``n`` UTF-8 bytes of ``text``, dropping a partial trailing character (Go byte slicing)."""
    return text.encode("utf-8")[:n].decode("utf-8", errors="ignore")


# Go's time.RFC3339 layout as the parser accepts it: optional fractional seconds (any number of
# digits), "Z" or a ±hh:mm offset, an upper-case "T".
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:(Z)|([+-])(\d{2}):(\d{2}))",
    re.ASCII,
)


def parse_timestamp(s: str) -> datetime:
    """Parse an RFC 3339 timestamp (offsets and fractional seconds allowed) to aware UTC.

    Fractions beyond microseconds are truncated. Raises :class:`InputError` if ``s`` is not a
    valid RFC 3339 date-time.
    """
    m = _RFC3339.fullmatch(s)
    if m is None:
        raise InputError(f'invalid timestamp "{s}": expected RFC 3339 such as 2026-02-18T10:00:00Z')
    year, month, day, hour, minute, second = (int(g) for g in m.group(1, 2, 3, 4, 5, 6))
    micros = int((m.group(7) or "0")[:6].ljust(6, "0"))
    try:
        if m.group(8):
            tz = timezone.utc
        else:
            offset = timedelta(hours=int(m.group(10)), minutes=int(m.group(11)))
            tz = timezone(-offset if m.group(9) == "-" else offset)
        # converting to UTC can step outside datetime's years 1-9999 (year 1 at +14:00, year 9999
        # at -14:00): OverflowError, reported like any other unusable stamp
        return datetime(year, month, day, hour, minute, second, micros, tzinfo=tz).astimezone(timezone.utc)
    except (ValueError, OverflowError) as exc:  # month 13, hour 24, offset ≥ 24h, year 0 ...
        raise InputError(f'invalid timestamp "{s}": {exc}') from None

# A canonical stamp (what every mnemon writer stores) whose date needs no calendar: a day up to 28 exists
# in every month. Anything else goes through the parser.
_PLAIN_STAMP = re.compile(r"\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|1\d|2[0-8])T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\dZ", re.ASCII)


def timestamp_parses(s: object) -> bool:
    """Whether ``parse_timestamp`` reads ``s`` (a str); a whole-table check (doctor) reads most
    stamps by the pattern alone."""
    if type(s) is not str:
        return False
    if _PLAIN_STAMP.fullmatch(s) is not None and not s.startswith("0000"):
        return True
    try:
        parse_timestamp(s)
    except InputError:
        return False
    return True


def encodable(text: str) -> bool:
    """Valid UTF-8 once encoded: no lone surrogate (a JSON ``\\ud800`` escape, or undecodable argv bytes)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_text(text: str, what: str) -> str:
    """Reject text that is not valid UTF-8 (lone surrogates from a bad argv) or holds NUL bytes."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"{what} is not valid UTF-8") from None
    if "\x00" in text:
        raise InputError(f"{what} must not contain NUL bytes")
    return text


def check_content(content: str) -> str:
    check_text(content, "content")
    size = len(content.encode("utf-8"))
    if size > MAX_CONTENT_BYTES:
        raise InputError(
            f"content too long ({size} chars, max {MAX_CONTENT_BYTES}); consider chunking into multiple remember calls"
        )
    if not content.strip():
        raise InputError("content must not be empty")
    return content


def plainly_draftable(values: list[str], most: int, max_bytes: int) -> bool:
    """Tags or entities a draft carries as they are, told without encoding any: at most ``most`` of them, none
    of more than ``max_bytes`` / 4 characters (so at most ``max_bytes`` bytes), none holding a NUL. False says
    only that import's own item check must look (``drafts.item_problem``)."""
    return len(values) <= most and all(len(v) <= max_bytes // 4 and "\x00" not in v for v in values)


def stored_text_problems(content: object, source: object) -> list[str]:
    """What keeps a stored memory's text out of any draft ``import`` takes, as doctor and export name it: an
    empty content or one of whitespace only, holding a NUL, or over MAX_CONTENT_BYTES, a source holding a NUL. No valid
    value stands for them without changing the memory (cutting it, dropping a character), so neither export
    nor ``doctor --repair`` writes one. (NULL or a blob is ``store.check``'s "content is empty", "not text".)"""
    found = []
    if content == "":
        found.append("content is empty")
    elif isinstance(content, str):
        if content.isspace():
            found.append("content is whitespace only")
        if "\x00" in content:
            found.append("content holds a NUL byte")
        # a content of at most MAX_CONTENT_BYTES / 4 characters is at most MAX_CONTENT_BYTES bytes: most rows
        # are never encoded
        if len(content) > MAX_CONTENT_BYTES // 4 and (size := len(content.encode("utf-8", "surrogatepass"))) > MAX_CONTENT_BYTES:
            found.append(f"content is {size} bytes, over the {MAX_CONTENT_BYTES} a memory holds")
    if isinstance(source, str) and "\x00" in source:
        found.append("source holds a NUL byte")
    return found


def check_category(category: str) -> str:
    if category not in CATEGORIES:
        raise InputError(f'invalid category "{category}"; valid: {", ".join(CATEGORIES)}')
    return category


def check_importance(importance: int) -> int:
    if not 1 <= importance <= 5:
        raise InputError(f"importance must be 1-5, got {importance}")
    return importance


def check_entity_mode(mode: str) -> str:
    if mode not in ENTITY_MODES:
        raise InputError(f'invalid entity mode "{mode}"; valid: {", ".join(ENTITY_MODES)}')
    return mode


def split_list(raw: str | None) -> list[str]:
    """Split a comma list, trim items and drop empties (``--tags``, ``--entities``)."""
    if not raw:
        return []
    return [item.strip() for item in raw.split(",") if item.strip()]


def _check_items(items: list[str], *, what: str, max_items: int, max_bytes: int) -> list[str]:
    for item in items:
        check_text(item, what)
        size = len(item.encode("utf-8"))
        if size > max_bytes:
            raise InputError(f"{what} too long ({size} chars, max {max_bytes}): {byte_prefix(item, 50)}")
    if len(items) > max_items:
        plural = "tags" if what == "tag" else "entities"
        raise InputError(f"too many {plural} ({len(items)}, max {max_items})")
    return items


def check_tags(tags: list[str]) -> list[str]:
    return _check_items(tags, what="tag", max_items=MAX_TAGS, max_bytes=MAX_TAG_BYTES)


def check_entities(entities: list[str]) -> list[str]:
    return _check_items(entities, what="entity", max_items=MAX_ENTITIES, max_bytes=MAX_ENTITY_BYTES)


def check_edge_type(edge_type: str) -> str:
    if edge_type not in EDGE_TYPES:
        raise InputError(f'invalid edge type "{edge_type}"; valid: {", ".join(EDGE_TYPES)}')
    return edge_type


def check_weight(weight: float) -> float:
    if not 0.0 <= weight <= 1.0:  # also rejects NaN
        raise InputError(f"weight must be between 0.0 and 1.0, got {weight:.2f}")
    return weight


# strconv's base-0 syntax: a sign, then a base prefix (0x, 0o, 0b, or a bare leading 0 for octal) or none,
# then the digits; an underscore only between digits or right after a prefix (Go's underscoreOK).
_BASE0 = re.compile(
    r"[+-]?(?:0[xX](?:_?[0-9a-fA-F])+|0[oO](?:_?[0-7])+|0[bB](?:_?[01])+|0(?:_?[0-7])*|[1-9](?:_?[0-9])*)",
    re.ASCII,
)
_BASES = {"x": 16, "o": 8, "b": 2}


def parse_flag_int(text: str) -> int:
    """``text`` as pflag reads an int flag (``strconv.ParseInt(text, 0, 64)``); ValueError with strconv's
    reason ("invalid syntax", "value out of range") otherwise."""
    if _BASE0.fullmatch(text) is None:
        raise ValueError("invalid syntax")
    body = text.lstrip("+-").replace("_", "")
    negative = text.startswith("-")
    if len(body) > 1 and body[0] == "0":
        base = _BASES.get(body[1].lower(), 8)
        digits = body[2:] if body[1].isalpha() else body[1:]
    else:
        base, digits = 10, body
    # (counted before int(): Python refuses to convert more than 4,300 digits with an error of its own)
    if len(digits.lstrip("0")) > 64:
        raise ValueError("value out of range")
    value = -int(digits, base) if negative else int(digits, base)
    if not -(2**63) <= value <= 2**63 - 1:
        raise ValueError("value out of range")
    return value


def flag_error(text: str, flag: str, reason: str, parse: str = "ParseInt") -> InputError:
    """Cobra's message for a number flag's value strconv refused (``parse``: ParseInt or ParseFloat)."""
    return InputError(f"invalid argument {go_quote(text)} for {go_quote(flag)} flag: "
                      f"strconv.{parse}: parsing {go_quote(text)}: {reason}")


# strconv.ParseFloat's syntax: a sign, then inf/infinity/nan (any case), a decimal with an optional exponent, or
# a hexadecimal mantissa with a binary exponent (underscores only there, as in Go's literals).
_FLOAT_WORD = re.compile(r"[+-]?(?:inf|infinity|nan)", re.ASCII | re.IGNORECASE)
_FLOAT_DEC = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
_FLOAT_HEX = re.compile(r"[+-]?0[xX](?:_?[0-9a-fA-F])*(?:\.(?:[0-9a-fA-F]_?)*)?[pP][+-]?[0-9]+", re.ASCII)


def parse_flag_float(text: str) -> float:
    """``text`` as pflag reads a float flag (``strconv.ParseFloat(text, 64)``); ValueError with strconv's reason
    otherwise. Python's float() also takes spaces, another script's digits and "1_0", and reads "1e400" as inf
    where Go says "value out of range"."""
    if _FLOAT_WORD.fullmatch(text):
        return float(text)
    if _FLOAT_DEC.fullmatch(text):
        value = float(text)
    elif _FLOAT_HEX.fullmatch(text) and "__" not in text and not text.rstrip("0123456789+-").endswith(("_p", "_P")):
        try:
            value = float.fromhex(text.replace("_", ""))
        except OverflowError:
            raise ValueError("value out of range") from None
    else:
        raise ValueError("invalid syntax")
    if math.isinf(value):
        raise ValueError("value out of range")
    return value


def check_int64(value: int, flag: str) -> int:
    """Refuse an int flag's value outside int64, as Go's flag parse does (Python's int has no bound; SQLite
    cannot bind it)."""
    if not -(2**63) <= value <= 2**63 - 1:
        raise flag_error(str(value), flag, "value out of range")
    return value


def check_limit(limit: int, flag: str = "--limit") -> int:
    if limit > 0:  # a hugely negative limit gets the contract's "at least 1" message below
        check_int64(limit, flag)
    if limit < 1:
        raise InputError(f"{flag} must be at least 1, got {limit}")
    return limit


def check_finite(value: float, flag: str) -> float:
    """Refuse inf and NaN: float() reads "inf", "nan" and "1e400" (which overflows to inf), and a
    non-finite value would reach the output as JSON null or turn a comparison or deadline into "never"."""
    if not math.isfinite(value):
        raise InputError(f"{flag} must be a finite number, got {value:g}")
    return value


def check_threshold(threshold: float) -> float:
    if threshold < 0:  # -inf too: it is negative, and this is the contract's message for that
        raise InputError(f"--threshold must be non-negative, got {threshold:g}")
    return check_finite(threshold, "--threshold")
