"""Calendar days and months named in a recall query ("on 8 May, 2023", "2023-05-08", "2023年5月8日";
"in May 2023", "2023年5月").

A question that names a day ("What did Gina find for her store on 1 February, 2023?") asks about
what was written that day, one that names a month ("What setback did Melanie face in October
2023?") about that month; recall weighs the keyword matches of memories created then more
(records.QUERY_DAY_BOOST, QUERY_MONTH_BOOST; engine.retrieve). Only dates with a year count: a
weekday, a month alone ("in June") or "last week" would need the asker's clock, which recall does
not read.

Pure: imports only ``regex``; no clock, no I/O. Days are compared with ``created_at``'s UTC date,
the form the store keeps.
"""

from __future__ import annotations

from datetime import date

import regex

__all__ = ["query_days", "query_months"]

_MONTHS = {
    name: number
    for number, names in enumerate(
        (("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
         ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"), ("october", "oct"),
         ("november", "nov"), ("december", "dec")),  # fmt: skip
        start=1,
    )
    for name in names
}
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_ORDINAL = r"(?:st|nd|rd|th)?"
# "8 May, 2023", "8th of May 2023"
_DAY_MONTH_YEAR = regex.compile(rf"\b(\d{{1,2}}){_ORDINAL}\s+(?:of\s+)?({_MONTH})\.?,?\s+(\d{{4}})\b", regex.IGNORECASE)
# "May 8, 2023", "May 8th 2023"
_MONTH_DAY_YEAR = regex.compile(rf"\b({_MONTH})\.?\s+(\d{{1,2}}){_ORDINAL},?\s+(\d{{4}})\b", regex.IGNORECASE)
# "2023-05-08" (ISO 8601, also the start of an RFC 3339 stamp)
_ISO = regex.compile(r"(?<![\d-])(\d{4})-(\d{2})-(\d{2})(?!\d)")
# "2023年5月8日" (Chinese and Japanese), with or without spaces
_HAN = regex.compile(r"(\d{4})\s*年\s*(\d{1,2})\s*月\s*(\d{1,2})\s*[日号號]")
# "May 2023", "Oct. 2023"; "2023年5月" when no day follows
_MONTH_YEAR = regex.compile(rf"\b({_MONTH})\.?,?\s+(\d{{4}})\b", regex.IGNORECASE)
_HAN_MONTH = regex.compile(r"(\d{4})\s*年\s*(\d{1,2})\s*月(?!\s*\d)")


def _day(year: str, month: int | str, day: str) -> str | None:
    try:
        return date(int(year), int(month), int(day)).isoformat()
    except ValueError:  # "31 February", month 13, year 0
        return None


def query_days(text: str) -> list[str]:
    """Return the ISO dates (``"2023-05-08"``) of the whole days ``text`` names, each once, in order
    of appearance; impossible dates are skipped. ``"on 8 May, 2023 or June 3rd 2023"`` →
    ``["2023-05-08", "2023-06-03"]``; ``"in May 2023"`` → ``[]``."""
    found: list[tuple[int, str]] = []
    for m in _DAY_MONTH_YEAR.finditer(text):
        found.append((m.start(), _day(m[3], _MONTHS[m[2].lower()], m[1]) or ""))
    for m in _MONTH_DAY_YEAR.finditer(text):
        found.append((m.start(), _day(m[3], _MONTHS[m[1].lower()], m[2]) or ""))
    for pattern in (_ISO, _HAN):
        for m in pattern.finditer(text):
            found.append((m.start(), _day(m[1], m[2], m[3]) or ""))
    return list(dict.fromkeys(day for _, day in sorted(found) if day))


def query_months(text: str) -> list[str]:
    """Return the months (``"2023-05"``) ``text`` names with a year, each once, in order of
    appearance, but none when it names a whole day (:func:`query_days`: the day is the narrower
    question). ``"in October 2023"`` → ``["2023-10"]``; ``"2023年7月"`` → ``["2023-07"]``;
    ``"on 3 June, 2023"`` → ``[]``."""
    if query_days(text):
        return []
    found: list[tuple[int, str]] = []
    for m in _MONTH_YEAR.finditer(text):
        found.append((m.start(), f"{int(m[2]):04d}-{_MONTHS[m[1].lower()]:02d}" if int(m[2]) else ""))
    for m in _HAN_MONTH.finditer(text):
        found.append((m.start(), f"{int(m[1]):04d}-{int(m[2]):02d}" if 1 <= int(m[2]) <= 12 and int(m[1]) else ""))
    return list(dict.fromkeys(month for _, month in sorted(found) if month))
