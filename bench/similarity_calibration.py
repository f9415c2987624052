"""Where each local model's cosines fall, so its similarity thresholds can be set by measurement.

    python bench/similarity_calibration.py DATA.json [DATA.json ...] [--minilm-path DIR] [--sample 40000]

Embeds every dialogue turn of the LoCoMo-format files as a memory (passage side) and every question
of categories 1-4 as a query, with all-MiniLM-L6-v2 (``--minilm-path``: a model directory as
``MNEMON_EMBED_MODEL_PATH`` takes) and multilingual-e5-small (the ``multilingual`` extra), through
``mnemon.embed.local.LocalEmbedder``, the code path recall and remember use. It prints, per model:

- memory-memory cosines of random pairs of turns of one conversation (what semantic auto-links,
  candidates and the diff advice compare): percentiles;
- query-memory cosines of each question with its evidence turns and with the other turns (what the
  similarity signal of recall compares);
- each MiniLM threshold of ``mnemon.records`` at its percentile of MiniLM's memory-memory
  distribution, and the e5 cosine at the same percentile: a threshold that selects the same share
  of pairs;
- over every pair of a conversation with a labelled memory (``mnemon.embed.passages``), each
  model's thresholds at their share among the whole texts' vectors and the composed cosine at the
  same share (``SimilarityScale.composed``), and MiniLM's diff cuts (0.5 / 0.7 / 0.9) at their
  share and e5's cosine there (``SimilarityScale.diff_*``), beside the values kept in ``records``.

Seeded: the same files give the same figures.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from quality import HEADLINE, evidence_ids, turn_units  # noqa: E402

from mnemon.embed import passages  # noqa: E402
from mnemon.embed.local import LocalEmbedder  # noqa: E402


def _views(data: list[dict[str, Any]]) -> list[tuple[list[str], list[frozenset[str]], list[tuple[str, set[str]]]]]:
    out = []
    for sample in data:
        units = turn_units(sample)
        questions = [(str(qa["question"]), evidence_ids(qa.get("evidence", []))) for qa in sample["qa"]
                     if int(qa["category"]) in HEADLINE and evidence_ids(qa.get("evidence", []))]  # fmt: skip
        out.append(([u.content for u in units], [u.covers for u in units], questions))
    return out


def measure(embedder: LocalEmbedder, views: list[Any], sample: int, seed: int = 7) -> dict[str, np.ndarray]:
    rng = random.Random(seed)
    pairs, relevant, other, rise_relevant, rise_other = [], [], [], [], []
    for texts, covers, questions in views:
        m = embedder.embed_batch(texts)
        for _ in range(sample // len(views)):
            i, j = rng.randrange(len(texts)), rng.randrange(len(texts))
            if i != j:
                pairs.append(float(m[i] @ m[j]))
        q = np.stack([embedder.embed_query(text) for text, _ in questions])
        sims = q @ m.T
        for k, (_, evidence) in enumerate(questions):
            hit = np.array([bool(c & evidence) for c in covers])
            relevant.extend(sims[k, hit].tolist())
            other.extend(sims[k, ~hit].tolist())
            # the relevance judgement's rise (mnemon.relevance.share): the cosine less the query's mean
            # cosine with the store
            rise = sims[k] - sims[k].mean()
            rise_relevant.extend(rise[hit].tolist())
            rise_other.extend(rise[~hit].tolist())
    return {"memory-memory": np.array(pairs), "query-evidence": np.array(relevant), "query-other": np.array(other),
            "rise-evidence": np.array(rise_relevant), "rise-other": np.array(rise_other)}


def labelled_pairs(embedder: LocalEmbedder, views: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Cosines of every pair of a conversation's turns with a labelled memory (``mnemon.embed.passages``): the
    whole texts' vectors, and the composed ones a store holds (what ``SimilarityScale.composed`` is set against)."""
    whole_all, composed_all = [], []
    for texts, _, _ in views:
        # the whole text's vector before composing: LocalEmbedder's inner pass (this benchmark only)
        whole = embedder._embed_texts(texts, query=False)
        whole = whole / np.linalg.norm(whole, axis=1, keepdims=True)
        composed = passages.compose(whole, texts, lambda pieces: embedder._embed_texts(pieces, query=False))
        labelled = np.array([passages.labelled_sentences(text) is not None for text in texts])
        upper = np.triu_indices(len(texts), 1)
        keep = labelled[upper[0]] | labelled[upper[1]]
        whole_all.append((whole @ whole.T)[upper][keep])
        composed_all.append((composed @ composed.T)[upper][keep])
    return np.concatenate(whole_all), np.concatenate(composed_all)


def at_share(source: np.ndarray, target: np.ndarray, value: float) -> tuple[float, float]:
    """(the ``target`` cosine that selects the share of pairs ``source`` selects at ``value``, that share)."""
    share = float((source >= value).mean())
    return (float(np.quantile(target, 1 - share)) if share > 0 else float(target.max())), share


SCALE_FIELDS = ("auto_link", "candidate", "diff_override", "diff_extra", "diff_add_below", "diff_conflict_at",
                "diff_duplicate_above")  # fmt: skip


def print_composed(models: dict[str, LocalEmbedder], views: list[Any]) -> None:
    """Each model's thresholds at the same share among composed vectors, and the diff advice's cuts for e5."""
    from mnemon.records import similarity_scale

    found = {name: labelled_pairs(e, views) for name, e in models.items()}
    print("\n| model | threshold | its value | share of pairs (whole texts) | composed cosine at that share | kept |")
    print("|---|---|---|---|---|---|")
    for name, (whole, composed) in found.items():
        scale = similarity_scale(name)
        for field in SCALE_FIELDS:
            value = getattr(scale, field)
            equal, share = at_share(whole, composed, value)
            kept = getattr(scale.for_vector(True), field)
            print(f"| {name} | {field} | {value} | {100 * share:.3f}% | {equal:.3f} | {kept} |")
    minilm, e5 = found["all-MiniLM-L6-v2"][0], found["multilingual-e5-small"][0]
    e5_scale = similarity_scale("multilingual-e5-small")
    print("\n| diff cut | MiniLM (the contract's) | share of pairs (whole texts) | e5 cosine at that share | kept |")
    print("|---|---|---|---|---|")
    for field in ("diff_add_below", "diff_conflict_at", "diff_duplicate_above"):
        value = getattr(similarity_scale("all-MiniLM-L6-v2"), field)
        equal, share = at_share(minilm, e5, value)
        print(f"| {field} | {value} | {100 * share:.3f}% | {equal:.3f} | {getattr(e5_scale, field)} |")


PERCENTILES = (1, 10, 50, 90, 99, 99.9)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", nargs="+")
    parser.add_argument("--minilm-path", required=True)
    parser.add_argument("--sample", type=int, default=40_000, help="random memory pairs in all")
    args = parser.parse_args(argv)
    views = []
    for path in args.data:
        views.extend(_views(json.loads(Path(path).read_text(encoding="utf-8"))))
    models = {
        "all-MiniLM-L6-v2": LocalEmbedder(model="all-MiniLM-L6-v2", model_dir=args.minilm_path),
        "multilingual-e5-small": LocalEmbedder(model="multilingual-e5-small", model_dir="/nonexistent"),
    }
    found = {name: measure(e, views, args.sample) for name, e in models.items()}
    print("| model | cosines | n | " + " | ".join(f"p{p}" for p in PERCENTILES) + " |")
    print("|---|---|---|" + "---|" * len(PERCENTILES))
    for name, dists in found.items():
        for kind, values in dists.items():
            cells = " | ".join(f"{np.percentile(values, p):.3f}" for p in PERCENTILES)
            print(f"| {name} | {kind} | {values.size} | {cells} |")
    from mnemon import records

    base, e5 = found["all-MiniLM-L6-v2"]["memory-memory"], found["multilingual-e5-small"]["memory-memory"]
    print("\n| MiniLM threshold | value | share of memory pairs above | e5 cosine at that share |\n|---|---|---|---|")
    for name in ("SEMANTIC_AUTO_COSINE", "SEMANTIC_CANDIDATE_COSINE", "DIFF_COSINE_OVERRIDE", "DIFF_COSINE_EXTRA",
                 "VECTOR_ANCHOR_FLOOR"):  # fmt: skip
        value = getattr(records, name)
        share = float((base >= value).mean())
        equal = float(np.quantile(e5, 1 - share)) if share > 0 else float(e5.max())
        print(f"| {name} | {value} | {100 * share:.3f}% | {equal:.3f} |")
    from mnemon.relevance import PROMPT_FLOOR

    print("\n| MiniLM rise (relevance) | pairs | share at or above | e5 rise at that share | ratio |\n|---|---|---|---|---|")
    for kind in ("rise-other", "rise-evidence"):
        base_rise, e5_rise = found["all-MiniLM-L6-v2"][kind], found["multilingual-e5-small"][kind]
        for value in (0.2, PROMPT_FLOOR, 0.4):
            share = float((base_rise >= value).mean())
            equal = float(np.quantile(e5_rise, 1 - share)) if share > 0 else float(e5_rise.max())
            print(f"| {value} | {kind} | {100 * share:.3f}% | {equal:.4f} | {value / equal:.2f} |")
    print_composed(models, views)
    return 0


if __name__ == "__main__":
    sys.exit(main())
