"""HashEmbedder: deterministic, offline, and similar for texts that share words."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mnemon.embed import Embedder
from mnemon.embed.fake import HashEmbedder, tokens


def test_satisfies_the_embedder_protocol() -> None:
    embedder = HashEmbedder()
    assert isinstance(embedder, Embedder)
    assert (embedder.model, embedder.protocol, embedder.dim) == ("hash", "fake", 64)
    assert embedder.probe() is True
    with embedder as same:
        assert same is embedder


def test_vectors_are_float64_unit_length_and_contiguous() -> None:
    matrix = HashEmbedder(dim=768).embed_batch(["one text", "another text here", ""])
    assert matrix.shape == (3, 768)
    assert matrix.dtype == np.float64 and matrix.flags.c_contiguous
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, rtol=1e-12)


def test_same_text_same_vector_across_instances() -> None:
    a = HashEmbedder(dim=32).embed("Deterministic vectors, please")
    b = HashEmbedder(dim=32).embed("Deterministic vectors, please")
    np.testing.assert_array_equal(a, b)


def test_embed_equals_the_batch_row() -> None:
    embedder = HashEmbedder()
    texts = ["first", "second text", "third one here"]
    matrix = embedder.embed_batch(texts)
    for row, text in enumerate(texts):
        np.testing.assert_array_equal(embedder.embed(text), matrix[row])


def test_same_vector_in_another_process_with_another_hash_seed() -> None:
    text = "the same words in every process"
    code = (
        "import sys; from mnemon.embed.fake import HashEmbedder\n"
        f"sys.stdout.write(HashEmbedder(dim=16).embed({text!r}).tobytes().hex())"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env, timeout=20)
    assert bytes.fromhex(out.stdout) == HashEmbedder(dim=16).embed(text).tobytes()


def test_known_vector_is_stable_across_releases() -> None:
    # Pinned so that a change to the hashing (which would silently change every benchmark and
    # every predicted cosine) is noticed.
    vector = HashEmbedder(dim=4).embed("mnemon")
    np.testing.assert_allclose(vector, PINNED_MNEMON_DIM4, rtol=0, atol=1e-12)


PINNED_MNEMON_DIM4 = [-0.7454652968628214, -0.244179037115224, -0.6158254389983567, 0.07360107125028223]


def test_shared_words_mean_higher_cosine() -> None:
    embedder = HashEmbedder(dim=256)
    base, near, far, unrelated = embedder.embed_batch(
        [
            "Project Alpha uses PostgreSQL for storage",
            "Project Alpha uses SQLite for storage",
            "Project Beta picked Redis",
            "the weather was lovely on Sunday",
        ]
    )
    assert base @ near > base @ far > base @ unrelated
    assert base @ near > 0.7
    assert abs(base @ unrelated) < 0.3


def test_cosine_tracks_bag_of_words_overlap() -> None:
    embedder = HashEmbedder(dim=4096)  # high dimension: random vectors are nearly orthogonal
    a, b = embedder.embed_batch(["red green", "red blue"])
    assert a @ b == pytest.approx(0.5, abs=0.05)
    a, b = embedder.embed_batch(["red green blue yellow", "red green blue purple"])
    assert a @ b == pytest.approx(0.75, abs=0.05)


def test_case_and_punctuation_do_not_matter() -> None:
    embedder = HashEmbedder()
    np.testing.assert_array_equal(embedder.embed("Hello, World!"), embedder.embed("hello world"))


def test_word_order_does_not_matter_but_repeats_do() -> None:
    embedder = HashEmbedder()
    np.testing.assert_allclose(embedder.embed("cat dog"), embedder.embed("dog cat"), atol=1e-15)
    assert not np.allclose(embedder.embed("cat cat dog"), embedder.embed("cat dog"))


def test_cjk_texts_share_character_tokens() -> None:
    assert tokens("我们选择了PostgreSQL") == ["我", "们", "选", "择", "了", "postgresql"]
    embedder = HashEmbedder(dim=256)
    a, b, c = embedder.embed_batch(["我们选择了数据库", "我们选择了缓存", "天气很好"])
    assert a @ b > a @ c


def test_text_without_words_gets_a_fixed_unit_vector() -> None:
    embedder = HashEmbedder()
    empty, punctuation = embedder.embed_batch(["", "!!! ..."])
    np.testing.assert_array_equal(empty, punctuation)
    assert np.linalg.norm(empty) == pytest.approx(1.0)


def test_empty_batch() -> None:
    assert HashEmbedder(dim=8).embed_batch([]).shape == (0, 8)


def test_dim_must_be_positive() -> None:
    for dim in (0, -1):
        with pytest.raises(ValueError):
            HashEmbedder(dim=dim)


@settings(max_examples=50, deadline=None)
@given(st.text(max_size=200))
def test_any_text_gives_a_finite_unit_vector(text: str) -> None:
    vector = HashEmbedder(dim=16).embed(text)
    assert vector.shape == (16,)
    assert np.isfinite(vector).all()
    assert np.linalg.norm(vector) == pytest.approx(1.0)
