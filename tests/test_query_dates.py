"""mnemon.query_dates: the calendar days and months a recall query names."""

from __future__ import annotations

import pytest

from mnemon.query_dates import query_days, query_months


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What did Gina find for her clothing store on 1 February, 2023?", ["2023-02-01"]),
        ("What did Maria start, as mentioned on 3 June, 2023?", ["2023-06-03"]),
        ("on the 8th of May 2023", ["2023-05-08"]),
        ("May 8, 2023 and June 3rd 2023", ["2023-05-08", "2023-06-03"]),  # in order of appearance
        ("Sept. 9, 2024 or 9 sep 2024", ["2024-09-09"]),  # abbreviations; each day once
        ("the deploy of 2026-03-04 (logged 2026-03-04T09:00:00Z)", ["2026-03-04"]),
        ("Gina在2023年2月1日为她的服装店找到了什么？", ["2023-02-01"]),
        ("2023 年 10 月 13 号", ["2023-10-13"]),
        ("in May 2023", []),  # a month alone names no day
        ("last Friday", []),  # relative dates need the asker's clock
        ("on 31 February, 2023 or 2023-13-01", []),  # impossible dates are no days
        ("may I ask about 12 items from 2023?", []),
        ("version 1.2023-05-081", []),  # an ISO date inside a longer number is none
    ],
)
def test_query_days(query: str, expected: list[str]) -> None:
    assert query_days(query) == expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What setback did Melanie face in October 2023?", ["2023-10"]),
        ("in May, 2023 and Oct. 2023", ["2023-05", "2023-10"]),
        ("Melanie在2023年10月遇到了什么挫折？", ["2023-10"]),
        ("on 3 June, 2023 and in July 2023", []),  # a day is named: the narrower question wins
        ("2023年10月13日", []),
        ("When did Melanie go camping in June?", []),  # no year: no month
        ("2023年13月", []),
    ],
)
def test_query_months(query: str, expected: list[str]) -> None:
    assert query_months(query) == expected
