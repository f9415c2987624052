"""Tests for mnemon.text: §4.1 tokenizer, Decision 13 stemmer, §4.2 measures, UTF-8 helpers."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mnemon.text import (
    STOPWORDS,
    byte_len,
    content_similarity,
    excerpt,
    insight_tokens,
    jaccard,
    keyword_score,
    recall_insight_terms,
    recall_sequence,
    recall_terms,
    stem,
    token_overlap,
    token_sequence,
    tokenize,
    truncate_bytes,
)

# --- tokenizer (§4.1) -------------------------------------------------------------------------


def test_stopword_list_has_the_contract_80_words() -> None:
    assert len(STOPWORDS) == 80
    assert {"a", "the", "where", "their", "shall"} <= STOPWORDS


def test_lowercases_and_drops_stopwords() -> None:
    assert tokenize("The Quick brown FOX is on the Table") == {"quick", "brown", "fox", "table"}


def test_punctuation_splits_words_but_letters_and_digits_join() -> None:
    assert token_sequence("http2, v1.2-beta_x; e-mail") == ["http2", "v1", "2", "beta", "x", "e", "mail"]


def test_han_runs_become_overlapping_bigrams_and_lone_han_stays_alone() -> None:
    assert token_sequence("选择向量数据库") == ["选择", "择向", "向量", "量数", "数据", "据库"]
    assert token_sequence("我 and 你") == ["我", "你"]


def test_han_and_latin_letters_do_not_share_a_token() -> None:
    # Han ends the Latin word and vice versa; bigrams never cross the boundary.
    assert token_sequence("用Qdrant存储") == ["用", "qdrant", "存储"]


def test_ideographic_punctuation_is_not_han_script() -> None:
    assert token_sequence("你好、世界") == ["你好", "世界"]


def test_only_decimal_digits_count_as_digits() -> None:
    # Go unicode.IsDigit is Nd only: superscripts (No) split, Arabic-Indic digits (Nd) stay.
    assert token_sequence("x² ١٢٣") == ["x", "١٢٣"]


def test_combining_marks_split_words_like_go() -> None:
    # "नमस्ते" = न म स ् त े: virama and vowel sign are marks (Mn/Mc), so the word splits.
    assert token_sequence("नमस्ते") == ["नमस", "त"]
    # A precomposed letter is one letter; a decomposed one is letter + mark.
    assert token_sequence("café") == ["café"]
    assert token_sequence("cafe\u0301") == ["cafe"]


def test_hiragana_is_a_letter_and_stays_in_words() -> None:
    assert token_sequence("ひらがな test") == ["ひらがな", "test"]


def test_go_rune_lowercasing_for_dotted_i_and_sigma() -> None:
    assert tokenize("İstanbul") == {"istanbul"}
    assert tokenize("ΟΔΟΣ") == {"οδοσ"}


def test_sequence_keeps_repeats_and_set_drops_them() -> None:
    assert token_sequence("rust rust go rust") == ["rust", "rust", "go", "rust"]
    assert tokenize("rust rust go rust") == {"rust", "go"}


def test_empty_and_stopword_only_texts() -> None:
    assert tokenize("") == set()
    assert tokenize("the and of ... !!!") == set()


def test_insight_tokens_tokenize_each_field_separately() -> None:
    tokens = insight_tokens("向量", ["数据"], ["Qdrant DB"])
    assert tokens == {"向量", "数据", "qdrant", "db"}
    assert "量数" not in tokens  # no bigram across content and tag


# --- stemmer (Decision 13: Snowball English, Porter2) -----------------------------------------


@pytest.mark.parametrize(
    ("family", "expected"),
    [
        (["paint", "paints", "painted", "painting"], "paint"),
        (["use", "uses", "used", "using"], "use"),
        (["run", "running"], "run"),
        (["story", "stories"], "stori"),
        (["study", "studies", "studied"], "studi"),
        (["box", "boxes"], "box"),
        (["class", "classes"], "class"),
        (["match", "matches"], "match"),
        (["create", "creates", "created", "creating"], "creat"),
        (["test", "tests", "tested", "testing"], "test"),
        (["stop", "stops", "stopped", "stopping"], "stop"),
        (["fall", "falls", "falling"], "fall"),
        (["embed", "embeds", "embedded", "embedding", "embeddings"], "embed"),  # Porter2 alone: "embed" → "emb"
        (["need", "needs", "needed", "needing"], "need"),
        (["agree", "agrees", "agreed", "agreeing"], "agre"),
        (["quick", "quickly"], "quick"),
        (["setting", "settings"], "set"),
        # derivations too, which the light stemmer before Porter2 left apart
        (["adopt", "adopted", "adopting", "adoption", "adoptions"], "adopt"),
        (["happy", "happiness"], "happi"),
        (["commit", "committed", "commitment"], "commit"),
    ],
)
def test_inflections_collapse_to_one_stem(family: list[str], expected: str) -> None:
    assert {stem(word) for word in family} == {expected}


@pytest.mark.parametrize("word", ["class", "status", "thing", "string", "speed", "news", "need"])
def test_words_that_only_look_inflected_are_left_alone(word: str) -> None:
    assert stem(word) == word


@pytest.mark.parametrize("token", ["go", "run", "abc", "won", "向量", "http2", "v8engine", "naïve", "1234"])
def test_short_non_ascii_and_alphanumeric_tokens_pass_through(token: str) -> None:
    assert stem(token) == token


def test_stem_is_applied_once() -> None:
    # Porter2 is not idempotent; a stem is never stemmed again, so "conversation" and
    # "conversations" meet at "convers", not at its own stem "conver"
    assert stem("conversation") == stem("conversations") == "convers"
    assert stem("convers") == "conver"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Switched OrderRouter to HTTPServer", ["order", "router", "http", "server"]),
        ("getHTTPResponse, getHTTPResponse", ["get", "http", "respons"]),  # stems, each once
        ("YouTube on my iPhone", ["tube", "phone"]),  # "you" a stopword, "i" one letter
        ("pH", []),  # no part of two letters
        ("23P01 from OAuth2Client", ["auth", "client"]),  # a code is no identifier; a number no term
        ("我们的PaymentGateway限流", ["payment", "gateway"]),  # a Han run ends the identifier
        ("naïveOrderRouter", []),  # ASCII identifiers only
        ("order_router and the ORDER router", []),  # the tokenizer splits snake case; no camel case
    ],
)  # fmt: skip
def test_a_camel_case_identifiers_words_are_recall_terms(text: str, expected: list[str]) -> None:
    from mnemon.text import identifier_terms, recall_query_terms

    assert identifier_terms(text) == expected
    assert set(expected) <= set(recall_query_terms(text))  # the query asks for them too
    assert all(p not in token_sequence(text) for p in ("payment", "phone", "http"))  # §4.1 tokens unchanged


def test_a_querys_identifier_words_follow_its_own_terms() -> None:
    from mnemon.text import recall_query_terms

    assert recall_query_terms("Why did OrderRouter drop the order?") == ["why", "orderrout", "drop", "order", "router"]


def test_an_identifiers_words_count_once_and_not_in_the_length() -> None:
    from mnemon.text import insight_views

    # like a tag's terms (Decision 12): tf 1 unless the content has the word itself, length unchanged
    terms, plain, length = insight_views("OrderRouter retries the order", ["PaymentGateway"], [])
    assert terms == ["orderrout", "retri", "order", "router", "paymentgateway", "payment", "gateway"]
    assert terms == recall_insight_terms("OrderRouter retries the order", ["PaymentGateway"], [])
    assert length == len(recall_sequence("OrderRouter retries the order")) == 3
    assert list(plain) == ["orderrouter", "retries", "order", "paymentgateway"]


def test_recall_terms_are_stemmed_with_repeats() -> None:
    assert recall_terms("Painted the paintings, painting again") == [
        "paint",
        "paint",
        "paint",
        "again",
    ]


def test_recall_insight_terms_count_field_only_terms_once() -> None:
    terms = recall_insight_terms("Rust rust tests", ["testing", "vector-db"], ["Vector", "Rust"])
    # content keeps its repeats; "vector" and "db" come from fields, once each.
    assert terms == ["rust", "rust", "test", "vector", "db"]


def test_recall_terms_add_each_han_character_after_its_runs_bigrams() -> None:
    # BM25 matches "限制流量" to "限流" through 限 and 流; the §4.1 tokens keep bigrams only.
    assert recall_terms("API 限流") == ["api", "限流", "限", "流"]
    assert recall_terms("选择向量库") == ["选择", "择向", "向量", "量库", "选", "择", "向", "量", "库"]
    assert recall_terms("我 and 你") == ["我", "你"]  # a lone character is its own term, once
    assert token_sequence("API 限流") == ["api", "限流"]
    assert tokenize("选择向量库") == {"选择", "择向", "向量", "量库"}


def test_recall_insight_terms_of_han_fields_have_their_characters_too() -> None:
    terms = recall_insight_terms("向量库", ["数据"], ["Qdrant"])
    assert terms == ["向量", "量库", "向", "量", "库", "数据", "数", "据", "qdrant"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # "什么时候" (when) and the particle 的 are no terms, and no bigram spans them
        ("Melanie什么时候受伤的？", ["melani", "受伤", "受", "伤"]),
        ("Caroline研究了什么？", ["carolin", "研究", "研", "究"]),
        ("為什麼選擇這家機構", ["選擇", "擇這", "這家", "家機", "機構", "選", "擇", "這", "家", "機", "構"]),
        ("谁在2023年去过海滩几次", ["在", "2023", "年去", "去过", "过海", "海滩", "年", "去", "过", "海", "滩", "次"]),
    ],
)
def test_recall_query_terms_leave_out_chinese_question_words(query: str, expected: list[str]) -> None:
    from mnemon.text import recall_query_terms

    assert recall_query_terms(query) == expected


def test_chinese_question_words_stay_in_stored_terms_and_contract_tokens() -> None:
    # query side only: a memory that says "为什么" keeps it, and §4.1 is unchanged
    assert "什么" in recall_terms("我不知道为什么")
    assert "什么" in tokenize("Caroline研究了什么")


# --- measures (§4.2) --------------------------------------------------------------------------


def test_keyword_score_is_share_of_query_tokens_found() -> None:
    assert keyword_score({"a1", "b1", "c1", "d1"}, {"a1", "c1", "x"}) == 0.5
    assert keyword_score(set(), {"a1"}) == 0.0


def test_token_overlap_divides_by_larger_set() -> None:
    assert token_overlap({"a", "b"}, {"a", "c", "d", "e"}) == 0.25
    assert token_overlap(set(), {"a"}) == 0.0


def test_content_similarity_divides_by_smaller_set() -> None:
    assert content_similarity({"a", "b"}, {"a", "c", "d", "e"}) == 0.5
    assert content_similarity({"a"}, set()) == 0.0


def test_jaccard() -> None:
    assert jaccard({"a", "b", "c"}, {"b", "c", "d"}) == 0.5
    assert jaccard(set(), set()) == 0.0


def test_diff_reference_jaccard_seven_ninths() -> None:
    alpha = tokenize("Project Alpha uses PostgreSQL database for persistent application storage")
    beta = tokenize("Project Beta uses PostgreSQL database for persistent application storage")
    assert jaccard(alpha, beta) == pytest.approx(7 / 9)


# --- UTF-8 helpers ----------------------------------------------------------------------------


def test_byte_len_counts_utf8_bytes() -> None:
    assert byte_len("abc") == 3
    assert byte_len("é") == 2
    assert byte_len("向量") == 6
    assert byte_len("😀") == 4


def test_truncate_bytes_never_splits_a_character() -> None:
    assert truncate_bytes("héllo", 2) == "h"
    assert truncate_bytes("héllo", 3) == "hé"
    assert truncate_bytes("向量数据", 7) == "向量"
    assert truncate_bytes("abc", 10) == "abc"
    assert truncate_bytes("abc", 0) == ""


def test_excerpt_collapses_whitespace_and_keeps_short_text() -> None:
    assert excerpt("  alpha \n\t beta\u00a0gamma  ", 240) == "alpha beta gamma"


def test_excerpt_cuts_to_n_code_points_with_ellipsis() -> None:
    out = excerpt("hello world wide web", 7)
    assert out == "hello…"  # first 6 code points "hello " right-trimmed, then the ellipsis
    assert excerpt("向量数据库很好", 4) == "向量数…"
    assert len(excerpt("x" * 500, 240)) == 240


def test_excerpt_exactly_n_code_points_is_unchanged() -> None:
    assert excerpt("abcde", 5) == "abcde"


# --- properties -------------------------------------------------------------------------------


@settings(derandomize=True, max_examples=300, deadline=None)
@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=14))
def test_property_stem_never_grows_and_keeps_short_words(word: str) -> None:
    once = stem(word)
    assert len(once) <= len(word)
    assert once.isalpha() and once.isascii()
    if len(word) < 4:
        assert once == word


@settings(derandomize=True, max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_property_sequence_and_set_agree_and_tokens_are_clean(text: str) -> None:
    sequence = token_sequence(text)
    assert set(sequence) == tokenize(text)
    assert not STOPWORDS & set(sequence)
    assert all(token and not any(ch.isspace() for ch in token) for token in sequence)


@settings(derandomize=True, max_examples=200, deadline=None)
@given(st.text(max_size=40), st.integers(min_value=0, max_value=50))
def test_property_truncate_bytes_is_a_valid_prefix(text: str, n: int) -> None:
    cut = truncate_bytes(text, n)
    assert text.startswith(cut)
    assert byte_len(cut) <= n
    assert byte_len(cut) > n - 4 or cut == text  # at most a partial character is dropped


# --- recall query terms: prepositional phrases left out (query side of BM25) -----------------


# --- possessors (query side of BM25) --------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What are Melanie's plans?", ["melani"]),
        ("Jon\u2019s studio and Gina's store", ["jon", "gina"]),  # either apostrophe, in order
        ("Melanie's kids and Melanie's dog", ["melani"]),  # each once
        ("What's it like? It's fine", []),  # contractions of stopwords carry no owner
        ("the kids' toys", []),  # a plural's possessive leaves no "s" term
        ("Melanie'sx", []),  # whole words only
        ("What are Melanie's plans with respect to adoption?", ["melani"]),
    ],
)
def test_possessor_query_terms(query: str, expected: list[str]) -> None:
    from mnemon.text import POSSESSIVE_TERM, possessor_query_terms, recall_query_terms

    assert possessor_query_terms(query) == expected
    if expected:  # the tokenizer leaves the possessive's "s" as a term of its own
        assert POSSESSIVE_TERM in recall_query_terms(query)


# --- derived query nouns (query side of BM25) -------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("When did Jon receive mentorship?", ["mentor"]),
        ("the mentorships", ["mentor"]),  # the suffix comes off the stemmed token: plurals count
        ("the judgement", ["judg"]),  # -ment, which Porter2 keeps after a root ending in e
        ("the nation", []),  # a root under 4 letters is no root
        ("a presentation", []),  # Porter2 stems it to its root ("present"): nothing to add
        ("mentorship and mentor", []),  # never a term the query already has
        ("friendship, friendship", ["friend"]),  # once, in order of appearance
        ("采用 mentorship", ["mentor"]),
    ],
)
def test_derived_query_terms(query: str, expected: list[str]) -> None:
    from mnemon.text import derived_query_terms

    assert derived_query_terms(query) == expected


@pytest.mark.parametrize(
    "query, expected",
    [
        ("When did Maria meet Jean?", ["met"]),
        ("What did Nate win?", ["won"]),  # the past a memory tells
        ("What has Nate won?", ["win"]),  # and the base from a past form ("wins", "winning" stem to "win")
        ("Where did she go?", ["gone", "gos", "went"]),  # sorted per verb
        ("What did Caroline find and take?", ["found", "taken", "took"]),  # "find" asks for "found"
        ("What has Melanie found?", []),  # "found" is as often "founded": an ambiguous form asks nothing
        ("What books has Melanie read?", []),  # no irregular verb
        ("did they meet and met", []),  # never a term the query already has
        ("WROTE 写作", ["write", "written"]),  # any case; Han text is not English
    ],
)
def test_irregular_query_terms(query: str, expected: list[str]) -> None:
    from mnemon.text import irregular_query_terms

    assert irregular_query_terms(query) == expected


@pytest.mark.parametrize("content, tags, entities", [
    ("Running tests daily; the runner runs them", ["testing", "CI"], ["GitHub Actions"]),
    ("中文记忆系统 works with paintings and painted walls", ["记忆"], ["Paint", "walls"]),
    ("", ["only tags", "tags"], []),
    ("the and of", [], ["The"]),
    ("Ünïcode İstanbul ΣΑΣ stories studied", ["stories"], ["İstanbul"]),
])  # fmt: skip
def test_insight_views_equal_the_three_separate_tokenisations(content, tags, entities) -> None:
    from mnemon.text import insight_tokens, insight_views, recall_insight_terms, recall_terms, token_sequence

    terms, plain, content_len = insight_views(content, tags, entities)
    assert terms == recall_insight_terms(content, tags, entities)
    assert set(plain) == insight_tokens(content, tags, entities)
    assert content_len == len(recall_terms(content))
    # first-seen order, not a set's (which the hash seed moves): the index's term ids follow it
    assert list(plain) == list(dict.fromkeys(t for f in (content, *tags, *entities) for t in token_sequence(f)))


def test_insight_views_with_a_memo_of_fields_equal_them_without() -> None:
    """The hot index keeps tag and entity texts' views over many rows: the same terms, tokens and
    lengths as tokenising every field again, the memo filled once per distinct field."""
    from mnemon.text import insight_views

    rows = [
        ("Kafka retries in PaymentGateway", ["payments"], ["Kafka", "PaymentGateway"]),
        ("Kafka lag on the orders topic", ["payments", "ops"], ["Kafka"]),
        ("中文记忆系统 and Kafka", ["记忆"], ["Kafka", "记忆系统"]),
        ("nothing shared", [], []),
    ]
    memo: dict[str, tuple[list[str], list[str]]] = {}
    for content, tags, entities in rows:
        assert insight_views(content, tags, entities, None, memo) == insight_views(content, tags, entities)
    assert set(memo) == {"payments", "ops", "Kafka", "PaymentGateway", "记忆", "记忆系统"}


def test_query_length_counts_words_and_han_characters_not_bigrams() -> None:
    from mnemon.text import query_length, recall_query_terms

    # "限流每秒一百个请求": 9 characters, as terms 8 bigrams and 9 characters; its length is 9, as
    # an English query of 9 words is 9 long (records.LONG_QUERY_TERMS means the same in both).
    assert query_length(recall_query_terms("限流每秒一百个请求")) == 9
    assert query_length(recall_query_terms("rate limit of one hundred requests per second")) == 7  # "of" is a stopword
    assert query_length(recall_query_terms("API 限流 API")) == 3  # distinct: api, 限, 流 (not the bigram 限流)
    assert query_length([]) == 0


def test_a_chinese_question_is_not_long_and_a_dialogue_turn_is() -> None:
    # The long-query regime (records.LONG_QUERY_TERMS to LONG_QUERY_FULL) counts words and Han characters:
    # a 17-character question (32 terms with its bigrams) is at most partly long; a whole dialogue turn is
    # long in Chinese as in English, and a short English question not at all.
    from mnemon.engine.retrieve import long_query_share
    from mnemon.text import recall_query_terms

    question = recall_query_terms("新版接口上线之后每秒能处理多少请求")
    assert len(set(question)) > 24 and long_query_share(question) < 0.6
    turn = "我昨天去了博物馆看了很多画，然后和朋友一起吃饭聊天，她说最近工作很忙，下个月要去上海出差。"
    assert long_query_share(recall_query_terms(turn)) == 1.0
    words = ("yesterday visited the museum and saw old paintings then had dinner with a friend who said work is "
             "busy and next month she travels to shanghai for meetings with clients, hoping to see the harbour, "
             "buy souvenirs for her parents and eat noodles near the river")
    assert long_query_share(recall_query_terms(words)) == 1.0
    assert long_query_share(recall_query_terms("when did Caroline paint a lake")) == 0.0


def test_the_long_query_regime_grows_with_the_length(monkeypatch: pytest.MonkeyPatch) -> None:
    # None of it at LONG_QUERY_TERMS and below, all of it at LONG_QUERY_FULL and above, linear between;
    # a switch when the two are equal. A Han character counts one word, its bigrams none.
    from mnemon.engine import retrieve
    from mnemon.records import LONG_QUERY_FULL, LONG_QUERY_TERMS

    def words(n: int) -> list[str]:
        return [f"w{k}" for k in range(n)]

    assert LONG_QUERY_TERMS < LONG_QUERY_FULL
    assert retrieve.long_query_share(words(LONG_QUERY_TERMS)) == 0.0
    assert retrieve.long_query_share(words(LONG_QUERY_FULL)) == 1.0
    assert retrieve.long_query_share(words(LONG_QUERY_FULL + 30)) == 1.0
    middle = (LONG_QUERY_TERMS + LONG_QUERY_FULL) // 2
    share = retrieve.long_query_share(words(middle))
    assert share == pytest.approx((middle - LONG_QUERY_TERMS) / (LONG_QUERY_FULL - LONG_QUERY_TERMS)) and 0 < share < 1
    han = [chr(0x4E00 + k) for k in range(middle)]  # as many distinct Han characters: as long
    assert retrieve.long_query_share(han + [a + b for a, b in zip(han, han[1:])]) == share
    # a model whose scale reads long queries (e5's long_below_best) keeps the switch it was measured with
    from mnemon.records import LONG_QUERY_SWITCH

    assert retrieve.long_query_share(words(LONG_QUERY_SWITCH), switch=True) == 0.0
    assert retrieve.long_query_share(words(LONG_QUERY_SWITCH + 1), switch=True) == 1.0
    monkeypatch.setattr(retrieve, "LONG_QUERY_FULL", 16)
    monkeypatch.setattr(retrieve, "LONG_QUERY_TERMS", 16)  # a switch
    assert retrieve.long_query_share(words(16)) == 0.0 and retrieve.long_query_share(words(17)) == 1.0


# --- proper names of a query (subject agreement) ----------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("When did Caroline meet Melanie's friends?", ["carolin", "melani"]),  # in order, possessive too
        ("Caroline's plans?", []),  # the query's first word starts a sentence: no name
        ("Why? Because Jon left.", ["jon"]),  # nor does a word after ".", "?" or "!"
        ('He said: "Nate won" and then "Nate" left', ["nate"]),  # each once; quotes do not start a sentence
        ("What did The band play", []),  # a stopword has no term
        ("What did Élodie and McDonald sell?", ["élodie", "mcdonald"]),  # any upper/lower-case letter pair
        ("What does the LGBTQ group or an iPhone do?", []),  # capitals only, or lower-case first: no name
        ("卡罗琳什么时候去的 Jon", ["jon"]),  # Han has no case
        ("我和Caroline去了公园", ["carolin"]),  # a Latin word ends where a Han run starts, on either side
        ("昨天 Melanie画了日出", ["melani"]),
        ("卡罗琳什么时候去的", []),
        # a query written in Han has no sentence case: its opening Latin word is a name too
        ("Caroline什么时候去参加LGBTQ支持小组的？", ["carolin"]),
        ("Gina如何描述Jon开的这家工作室？", ["gina", "jon"]),
        ("Jon和Gina什么时候决定合作的？", ["jon", "gina"]),
        ("Caroline 4年前是从哪里搬来的？", ["carolin"]),  # a space after the name, not a Han character
        ("好的。Melanie画了什么？", ["melani"]),  # after a full stop as well
        ("Melanie painted 日出?", []),  # mostly English: its first word still starts the sentence
    ],
)
def test_query_name_terms(query: str, expected: list[str]) -> None:
    from mnemon.text import query_name_terms

    assert query_name_terms(query) == expected


def test_a_text_is_written_in_han_when_its_characters_outnumber_its_other_words_two_to_one() -> None:
    from mnemon.text import written_in_han

    assert written_in_han("Caroline什么时候去参加LGBTQ支持小组的？")  # twelve characters, two words
    assert written_in_han("生产环境的 Redis 内存上限设为多少") and written_in_han("接口")
    assert not written_in_han("What does 缓存 mean?") and not written_in_han("How is Redis configured?")
    assert not written_in_han("ok 好") and not written_in_han("")  # two characters are one word's worth
