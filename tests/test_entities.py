"""Tests for mnemon.entities: §4.3 regex paths, dictionary, index-aware path, entity modes."""

from __future__ import annotations

import pytest

from mnemon.entities import (
    ACRONYM_STOPWORDS,
    TECH_DICTIONARY,
    extract_entities,
    extract_known_entities,
    resolve_entities,
)
from mnemon.errors import InputError


def test_lists_have_the_contract_sizes() -> None:
    assert len(ACRONYM_STOPWORDS) == 59  # 21 two-letter + 38 three-letter words
    assert {"Go", "gRPC", "Neo4j", "PostgreSQL", "RLM"} <= TECH_DICTIONARY


def test_camel_case_needs_two_humps() -> None:
    assert extract_entities("HttpServer talks to Server and iPhone") == ["HttpServer"]


def test_typescript_found_by_camel_case_and_dictionary_once() -> None:
    assert extract_entities("TypeScript everywhere; TypeScript again") == ["TypeScript"]


def test_all_caps_two_to_six_letters_with_ascii_boundaries() -> None:
    found = extract_entities("The API uses HTTP and JWT over gRPC, not ABCDEFG or HTTP2")
    assert found == ["API", "HTTP", "JWT", "gRPC"]  # no RPC inside gRPC, no 7-letter run


def test_acronym_stopwords_are_never_entities() -> None:
    assert extract_entities("THE AND FOR ARE NOT GO") == []


def test_file_paths() -> None:
    assert extract_entities("edit src/main.go and ./config.yaml") == ["src/main.go", "./config.yaml"]
    assert extract_entities('open "notes.md", then (docs/guide.txt).') == ["notes.md", "docs/guide.txt"]


def test_file_paths_keep_go_non_overlapping_quirk() -> None:
    # The space after a.go is consumed as its trailing delimiter, so b.go lacks a leading one.
    assert extract_entities("see a.go b.go c.go") == ["a.go", "c.go"]


def test_file_path_at_end_of_text_before_newline() -> None:
    # RE2's $ is end of text; Python's would also match before a trailing newline.
    assert extract_entities("open file.txt\n") == ["file.txt"]
    assert extract_entities("open file.txt\nnext") == ["file.txt"]


def test_urls_stop_at_quotes_brackets_and_space() -> None:
    assert extract_entities("docs at https://example.com/a?b=1) and 'http://x.io/p'") == [
        "https://example.com/a?b=1",
        "http://x.io/p",
    ]


def test_mentions_report_the_name() -> None:
    assert extract_entities("ping @alice and @bob_2") == ["alice", "bob_2"]


def test_chinese_title_and_quote_marks_report_inner_text() -> None:
    assert extract_entities("读《三体》和「道德经」") == ["三体", "道德经"]


def test_dictionary_terms_are_case_sensitive() -> None:
    assert extract_entities("Chose Qdrant because Rust performance; PostgreSQL, not rust") == [
        "Qdrant",
        "Rust",
        "PostgreSQL",
    ]


def test_paths_run_in_contract_order_then_dictionary() -> None:
    text = "Rust ./run.sh HttpServer API @dev https://a.b 「x」"
    assert extract_entities(text) == ["HttpServer", "API", "./run.sh", "https://a.b", "dev", "x", "Rust"]


def test_ascii_word_boundaries_ignore_non_ascii_letters() -> None:
    # é is not an ASCII word character, so RE2 sees a boundary between it and "API".
    assert extract_entities("éAPI") == ["API"]


def test_known_entities_admit_capitalized_and_split_words_only_if_known() -> None:
    known = {"Alpha", "qdrant", "Beta-2", "THE"}
    assert extract_known_entities("Alpha index tuning for qdrant, Gamma and THE", known) == [
        "Alpha",
        "qdrant",
    ]
    assert extract_known_entities("Alpha", set()) == []


def test_resolve_modes() -> None:
    text = "Chose Qdrant over Milvus"
    assert resolve_entities(["Vector DB", ""], text, "provided", None) == ["Vector DB"]
    assert resolve_entities(["Vector DB"], text, "auto", None) == ["Qdrant", "Milvus"]
    assert resolve_entities(["Milvus", "Vector DB"], text, "merge", None) == ["Milvus", "Vector DB", "Qdrant"]


def test_resolve_adds_index_aware_entities_after_extracted_ones() -> None:
    out = resolve_entities(["X"], "Alpha chose Qdrant", "merge", {"Alpha", "Qdrant"})
    assert out == ["X", "Qdrant", "Alpha"]
    assert resolve_entities([], "Alpha chose Qdrant", "auto", {"Alpha"}) == ["Qdrant", "Alpha"]


def test_resolve_rejects_unknown_mode() -> None:
    with pytest.raises(InputError, match=r'^invalid entity mode "both"; valid: merge, provided, auto$'):
        resolve_entities([], "x", "both", None)
