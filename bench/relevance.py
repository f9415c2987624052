"""Recall on prompt: does it inject memories only when they are about the prompt? (issue 28)

    python bench/relevance.py DATA.json [--lang en|zh] [--units turns|facts|both]
                              [--embed none|local|both] [--embed-model NAME] [--mode cli|inprocess]
                              [--long-query other|far] [--negatives FILE.json]
                              [--separate shuffle|alone] [--as-written] [--out FILE.md]

Each conversation becomes its own store (``bench/quality.py``'s loading: one insight per turn, or per
fact). Every question of categories 1-4 is a *positive* prompt; the prompts of
``bench/relevance_negatives.json`` (coding, writing, everyday requests, written for this harness; the
``--lang`` list) are *negatives*, asked of every store. Each prompt goes through what the prompt hook
runs, ``recall --limit 3`` (``mnemon.setup.hooks.RECALL_LIMIT``), and per floor the harness keeps the hits
whose ``relevance`` is at least the floor (superseded hits never: the hook skips them). Reported per floor:

- positives injected: the share of positives with at least one kept hit covering an evidence turn;
- negatives injected: the share of negative prompts (per store) with anything kept;
- lines per injection: the mean number of kept hits over the prompts that inject anything.

``--long-query other|far`` asks each positive as a long prompt, the question after a borrowed dialogue
turn (``quality.long_query``): a real prompt is a whole turn, where the words a memory carries are a few
among many, and the floor was calibrated on bare questions. ``other``: a turn of the next conversation
(no word of it is about this store); ``far``: a turn half this conversation away from the evidence, put
out of recall's scope for that prompt (``quality.out_of_scope``; turns view only), since a prompt is no
memory of the store. The negatives are then long prompts too: each after a turn of the next conversation
(spread over it), words about other people's lives that no memory of this store is about, so that a judgement
which reads a long prompt's parts is also measured on long prompts it should keep out.

The row ``score >= 0.65`` is the old hook, for comparison: ``recall --limit 5`` and its relative floor. ``--mode cli`` runs every
recall as a whole process (``--verbose``, which carries the same ``relevance`` as ``--brief``);
``--mode inprocess`` calls ``mnemon.cli.main`` in this process (same code path, faster).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from quality import (  # noqa: E402
    Key,
    Runner,
    conversation_turns,
    evidence_ids,
    fact_units,
    long_query,
    out_of_scope_index,
    separate_units,
    turn_units,
)

from mnemon.setup.hooks import RECALL_FLOOR, RECALL_LIMIT  # noqa: E402

OLD_LIMIT = 5
OLD_SCORE_FLOOR = 0.65
FLOORS = (0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5)
NEGATIVES = Path(__file__).resolve().parent / "relevance_negatives.json"
LONG_QUERY_KINDS = ("other", "far")


@dataclass
class Hit:
    score: float
    relevance: float
    superseded: bool
    covers: frozenset[str]


@dataclass
class Prompt:
    positive: bool
    evidence: frozenset[str]
    hits: list[Hit]  # recall --limit RECALL_LIMIT, as the hook asks
    old_hits: list[Hit]  # recall --limit 5, as the old hook asked


@dataclass
class Run:
    units: str
    embed: str
    prompts: list[Prompt] = field(default_factory=list)
    long: str = ""  # the positives' long-prompt view (LONG_QUERY_KINDS), "" for the bare questions


def _ask(run: Runner, text: str, covers: dict[tuple[str, str], frozenset[str]], limit: int,
         exclude: Key | None = None) -> list[Hit]:  # fmt: skip
    _, out = run("recall", "--limit", str(limit), "--verbose", "--readonly", "--", text, exclude=exclude)
    hits = []
    for r in json.loads(out)["results"]:
        key = (r["insight"]["content"], r["insight"]["created_at"])
        hits.append(Hit(float(r["score"]), float(r["relevance"]), bool(r.get("superseded")), covers.get(key, frozenset())))
    return hits


def _both(run: Runner, text: str, covers: dict[tuple[str, str], frozenset[str]],
          exclude: Key | None = None) -> tuple[list[Hit], list[Hit]]:  # fmt: skip
    return _ask(run, text, covers, RECALL_LIMIT, exclude), _ask(run, text, covers, OLD_LIMIT, exclude)


def run_store(sample: dict[str, Any], units_kind: str, embed: str, negatives: list[str], env: dict[str, str],
              mode: str, root: Path, long: str = "", foreign: list[dict[str, Any]] | None = None,
              separate: str = "", as_written: bool = False) -> list[Prompt]:  # fmt: skip
    units = turn_units(sample, as_written) if units_kind == "turns" else fact_units(sample)
    if separate:  # the event-memory shape (quality.separate_units)
        units = separate_units(units, separate, str(sample.get("sample_id", "conv")))
    data_dir = root / f"{sample.get('sample_id', 'conv')}-{units_kind}-{embed}"
    run = Runner(data_dir, env, mode)
    draft = root / f"{data_dir.name}.json"
    items = [{"content": u.content, "created_at": u.created_at, "source": u.source} for u in units]
    draft.write_text(json.dumps({"schema_version": "1", "insights": items}), encoding="utf-8")
    run("import", str(draft), "--no-diff")
    if embed == "local":
        run("embed", "--all")
    covers = {(u.content, u.created_at): u.covers for u in units}
    turns = conversation_turns(sample)
    position = {str(t["dia_id"]): i for i, t in enumerate(turns)}
    prompts = []
    for qa in sample["qa"]:
        evidence = evidence_ids(qa.get("evidence", []))
        if evidence and int(qa["category"]) in (1, 2, 3, 4):
            question = str(qa["question"])
            prompt, borrowed = long_query(question, evidence, turns, position, long, foreign) if long else (question, "")
            # far: the borrowed turn is a memory of the store, a prompt is not; out of scope for this prompt
            left_out = out_of_scope_index(units_kind, units, borrowed, long, borrowed_out=True)
            exclude = None if left_out is None else (units[left_out].content, units[left_out].created_at)
            prompts.append(Prompt(True, frozenset(evidence), *_both(run, prompt, covers, exclude)))
    for j, text in enumerate(negatives):
        if long and foreign:  # long too: a turn of another conversation first, spread over that conversation
            text = f"{foreign[j * len(foreign) // len(negatives)]['text']} {text}"
        prompts.append(Prompt(False, frozenset(), *_both(run, text, covers)))
    return prompts


def run_all(data: list[dict[str, Any]], units_kind: str, embed: str, negatives: list[str], mode: str,
            model_path: str | None, long: str = "", model: str | None = None, separate: str = "",
            as_written: bool = False) -> Run:  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMON_")}
    env["MNEMON_SERVER"] = "off"
    env["MNEMON_MAX_INSIGHTS"] = "0"
    env["MNEMON_EMBED_ENDPOINT"] = "http://127.0.0.1:9"  # no server: embedding-free unless local
    if embed == "local":
        env["MNEMON_EMBED_PROTOCOL"] = "local"
        if model_path:
            env["MNEMON_EMBED_MODEL_PATH"] = model_path
        if model:
            env["MNEMON_EMBED_MODEL"] = model
    result = Run(units_kind, embed, long=long)
    with tempfile.TemporaryDirectory(prefix="mnemon-relevance-") as tmp:
        for k, sample in enumerate(data):
            # other: the next conversation's turns, as quality.py borrows them
            foreign = conversation_turns(data[(k + 1) % len(data)]) if len(data) > 1 else None
            result.prompts.extend(run_store(sample, units_kind, embed, negatives, env, mode, Path(tmp), long, foreign,
                                            separate, as_written))  # fmt: skip
    return result


def kept(hits: list[Hit], floor: float, by_score: bool = False) -> list[Hit]:
    """The hits the hook injects at ``floor`` (on ``relevance``, or on the old relative ``score``)."""
    return [h for h in hits if not h.superseded and (h.score if by_score else h.relevance) >= floor]


def figures(prompts: list[Prompt], floor: float, by_score: bool = False) -> tuple[float, float, float]:
    """(positives with evidence injected %, negatives with anything injected %, lines per injection)."""
    pos = [p for p in prompts if p.positive]
    neg = [p for p in prompts if not p.positive]

    def injected(p: Prompt) -> list[Hit]:
        return kept(p.old_hits if by_score else p.hits, floor, by_score)

    pos_ok = sum(1 for p in pos if any(h.covers & p.evidence for h in injected(p)))
    neg_in = sum(1 for p in neg if injected(p))
    lines = [len(k) for p in prompts if (k := injected(p))]
    return (100.0 * pos_ok / max(1, len(pos)), 100.0 * neg_in / max(1, len(neg)),
            statistics.fmean(lines) if lines else 0.0)  # fmt: skip


def table(result: Run) -> str:
    n_pos = sum(1 for p in result.prompts if p.positive)
    n_neg = len(result.prompts) - n_pos
    view = f", positives as long prompts ({result.long})" if result.long else ""
    out = [f"### units={result.units}, embeddings={result.embed}{view} ({n_pos} positives, {n_neg} negative asks)", "",
           "| floor | positives with evidence injected | negatives with anything injected | lines per injection |",
           "|---|---|---|---|"]  # fmt: skip
    rows = [(f"old: limit {OLD_LIMIT}, score >= {OLD_SCORE_FLOOR}", figures(result.prompts, OLD_SCORE_FLOOR, by_score=True))]
    rows += [(f"limit {RECALL_LIMIT}, relevance >= {f}" + (" (default)" if f == RECALL_FLOOR else ""), figures(result.prompts, f))
             for f in FLOORS]  # fmt: skip
    for name, (pos, neg, lines) in rows:
        out.append(f"| {name} | {pos:.1f}% | {neg:.1f}% | {lines:.2f} |")
    return "\n".join(out + [""])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", help="LoCoMo-format JSON (a list of conversations)")
    parser.add_argument("--lang", choices=("en", "zh"), default="en", help="which negatives to ask")
    parser.add_argument("--units", choices=("turns", "facts", "both"), default="both")
    parser.add_argument("--embed", choices=("none", "local", "both"), default="none")
    parser.add_argument("--mode", choices=("cli", "inprocess"), default="cli")
    parser.add_argument("--model-path", default=os.environ.get("MNEMON_EMBED_MODEL_PATH"),
                        help="model directory for --embed local (default: $MNEMON_EMBED_MODEL_PATH)")  # fmt: skip
    parser.add_argument("--embed-model", help="--embed local: the model's name (MNEMON_EMBED_MODEL), e.g. "
                        "multilingual-e5-small (the multilingual extra); default all-MiniLM-L6-v2 or the path's")  # fmt: skip
    parser.add_argument("--long-query", choices=LONG_QUERY_KINDS, default="",
                        help="ask each positive after a borrowed dialogue turn (quality.long_query): of the next "
                             "conversation (other) or half this one away, out of scope (far)")  # fmt: skip
    parser.add_argument("--negatives", help="a JSON list of prompts no memory answers, instead of "
                        "relevance_negatives.json's --lang list (e.g. an event-memory set's no-match probes)")  # fmt: skip
    parser.add_argument("--separate", choices=("shuffle", "alone"), default="",
                        help="the units as separate event memories (quality.separate_units)")
    parser.add_argument("--as-written", action="store_true",
                        help="each turn's text alone, no speaker prefix (quality.turn_units)")
    parser.add_argument("--out", help="also write the markdown tables here")
    args = parser.parse_args(argv)

    data = json.loads(Path(args.data).read_text(encoding="utf-8"))
    if args.negatives:
        negatives = [str(p) for p in json.loads(Path(args.negatives).read_text(encoding="utf-8"))]
    else:
        negatives = json.loads(NEGATIVES.read_text(encoding="utf-8"))[args.lang]
    parts = [f"Data: {Path(args.data).name} ({len(data)} conversations), {len(negatives)} {args.lang} negatives, "
             f"mode {args.mode}" + (f", positives as long prompts ({args.long_query})" if args.long_query else ""), ""]
    for embed in ("none", "local") if args.embed == "both" else (args.embed,):
        for units in ("turns", "facts") if args.units == "both" else (args.units,):
            part = table(run_all(data, units, embed, negatives, args.mode, args.model_path, args.long_query,
                                 args.embed_model, args.separate, args.as_written))
            parts.append(part)
            print(part, flush=True)
    if args.out:
        Path(args.out).write_text("\n".join(parts), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
