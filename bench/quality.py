"""Retrieval-quality harness over LoCoMo-format conversations (evidence recall@k and MRR per category).

    python bench/quality.py DATA.json [--units turns|facts] [--embed none|local|both]
                            [--mode cli|inprocess] [--limit 20] [--long-query other|far|prev|probe]
                            [--borrowed-out] [--separate shuffle|alone] [--as-written] [--out FILE.md]

Each conversation becomes its own store in a fresh data dir, loaded with ``import --no-diff``:

- ``--units turns`` (default): one insight per dialogue turn, ``"<speaker>: <text>"`` (plus the
  shared photo's caption, as LoCoMo's own baselines do), ``created_at`` = the session's date plus
  one second per turn, so the store's order is the conversation's order;
- ``--units facts``: one insight per observation (the data set's atomic facts), ``source`` = the
  speaker, ``created_at`` = the session's date plus one second per fact; a fact stands for the
  dialogue turns it cites.

Every question is then asked through ``recall QUESTION --limit 20``. For each question the
evidence recall@k is the share of its evidence turns covered by the top k results (k = 5, 10, 20);
MRR is 1 / rank of the first result covering any evidence turn (0 when none does). Figures are
averaged per category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial) and
over categories 1-4 (the headline, question-weighted). Latency is the wall time of each recall.
A second table gives R@10 over categories 1-4 per conversation and the mean of the conversations
(each weighed once), the figures a ranking change is judged on (bench/quality-ablations.md).
``--long-query other|far|prev`` asks each question after a borrowed dialogue turn (``long_query``):
long queries, where a few words matter among many, as in a probe that is a whole dialogue turn.
``--long-query probe`` asks the dialogue turn just before the first evidence turn alone, that turn out
of recall's scope (``out_of_scope``): the held-out probes' condition, a turn that is no memory;
``--borrowed-out`` puts the borrowed turn of ``far`` and ``prev`` out of scope the same way.
``--separate shuffle|alone`` stores the units as separate event memories (``separate_units``), as the
held-out Chinese set's are: no backbone between turns of the conversation, so the neighbour lift and the
session prior carry no signal; with ``--long-query probe`` the proxy of that set. ``--as-written`` stores
each turn's text alone (no ``"<speaker>: "``, no caption), for a set whose turns are event memories.

``--mode cli`` (the default) runs every command as a whole process, as an agent would. ``--mode
inprocess`` calls ``mnemon.cli.main`` in this process: the same code path and the same rankings, without
the start-up cost, so most figures in bench/quality-ablations.md come from it (the two modes were
compared question by question there, last on the independent English check; the latency line is only
meaningful in ``cli`` mode). ``--embed local`` sets
``MNEMON_EMBED_PROTOCOL=local`` (needs the ``local`` extra and a model: ``MNEMON_EMBED_MODEL_PATH``
or ``mnemon embed --install-model``); ``both`` runs without and with embeddings.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
HEADLINE = (1, 2, 3, 4)
KS = (5, 10, 20)
_SESSION_DATE = re.compile(r"(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+(\w+),?\s+(\d{4})", re.IGNORECASE)
_DIA_ID = re.compile(r"D\d+:\d+")


# --- the data set -> drafts ------------------------------------------------------------------


def session_start(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` -> an aware UTC datetime."""
    m = _SESSION_DATE.search(text)
    if m is None:
        raise ValueError(f"unparsable session date {text!r}")
    hour, minute, half, day, month, year = m.groups()
    h = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
    stamp = datetime.strptime(f"{day} {month} {year}", "%d %B %Y")
    return stamp.replace(hour=h, minute=int(minute), tzinfo=timezone.utc)


def _rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _sessions(conversation: dict[str, Any]) -> list[tuple[int, datetime, list[dict[str, Any]]]]:
    out = []
    for key, turns in conversation.items():
        m = re.fullmatch(r"session_(\d+)", key)
        if m and isinstance(turns, list) and turns:
            out.append((int(m.group(1)), session_start(conversation[f"{key}_date_time"]), turns))
    return sorted(out, key=lambda s: s[0])


def evidence_ids(raw: Any) -> set[str]:
    """Dialogue ids cited by a question or a fact (the data holds a few ``"D8:6; D9:17"`` strings)."""
    items = raw if isinstance(raw, list) else [raw]
    found: set[str] = set()
    for item in items:
        found.update(_DIA_ID.findall(str(item).replace(" ", "")))
    return found


@dataclass
class Unit:
    content: str
    created_at: str
    source: str
    covers: frozenset[str]  # dialogue ids this insight stands for


def turn_units(sample: dict[str, Any], as_written: bool = False) -> list[Unit]:
    """One unit per dialogue turn, ``"<speaker>: <text>"`` and the shared photo's caption; ``as_written``:
    the turn's text alone, nothing added, for a data set whose turns are event memories as an agent stores
    them (``remember "API 限流为每秒一百个请求"``: no speaker, no caption)."""
    units = []
    for _, start, turns in _sessions(sample["conversation"]):
        for i, turn in enumerate(turns):
            text = str(turn["text"]) if as_written else f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption") and not as_written:
                text += f" [shares {turn['blip_caption']}]"
            units.append(Unit(text, _rfc3339(start + timedelta(seconds=i)), "user", frozenset({turn["dia_id"]})))
    return units


def fact_units(sample: dict[str, Any]) -> list[Unit]:
    dates = {n: start for n, start, _ in _sessions(sample["conversation"])}
    units = []
    for key, by_speaker in sorted(sample["observation"].items(), key=lambda kv: int(re.findall(r"\d+", kv[0])[0])):
        n = int(re.findall(r"\d+", key)[0])
        i = 0
        for speaker, facts in by_speaker.items():
            for fact in facts:
                text, cited = fact[0], fact[1] if len(fact) > 1 else []
                units.append(Unit(text, _rfc3339(dates[n] + timedelta(seconds=i)), speaker, frozenset(evidence_ids(cited))))
                i += 1
    return units


def units_of(sample: dict[str, Any], units_kind: str, as_written: bool = False) -> list[Unit]:
    """The units ``units_kind`` names (``turns`` or ``facts``); ``as_written`` for turns only."""
    return turn_units(sample, as_written) if units_kind == "turns" else fact_units(sample)


def conversation_turns(sample: dict[str, Any]) -> list[dict[str, Any]]:
    """Every dialogue turn of ``sample`` in conversation order."""
    return [turn for _, _, turns in _sessions(sample["conversation"]) for turn in turns]


LONG_QUERY_KINDS = ("other", "far", "prev", "probe")


def long_query(question: str, evidence: set[str], turns: list[dict[str, Any]], position: dict[str, int],
               kind: str, foreign: list[dict[str, Any]] | None = None) -> tuple[str, str]:
    """A long query built from a question: (query, the dialogue id of the borrowed turn when that turn
    is a memory of the store, else "").

    The held-out Chinese probes are whole dialogue turns, where the words that matter are a few among
    many. These views make such queries from the development questions without reading the held-out
    set, by putting a dialogue turn's text before the question:

    - ``other``: the turn at the same position (modulo its length) of another conversation
      (``foreign``; the next one in the file): words that match no memory of this store on purpose,
      as most of a real probe's words do not, with nothing of the answer in them;
    - ``far``: the turn half this conversation away from the first evidence turn: off topic, and its
      own neighbours in the store match it well (a harder, pessimistic view);
    - ``prev``: the turn just before the first evidence turn (after the last when the first opens the
      conversation): on topic, but flattering: the evidence is that turn's backbone neighbour, which
      recall lifts on purpose, where a real probe's turn is no memory at all;
    - ``probe``: that same turn's text alone, without the question: a dialogue turn that should bring
      back the event after it, as a held-out probe is. The harness puts it out of recall's scope
      (``out_of_scope``), since a probe is no memory.

    The borrowed turn of ``far``, ``prev`` and ``probe`` is left out of the ranking (a probe's turn is
    no memory); ``--borrowed-out`` (always, for ``probe``) takes it out of the scope as well.
    """
    ordered = sorted(position[e] for e in evidence if e in position)
    if not ordered:
        return question, ""
    if kind == "other" and foreign:
        return f"{foreign[ordered[0] % len(foreign)]['text']} {question}", ""
    if kind in ("prev", "probe"):
        i = ordered[0] - 1 if ordered[0] > 0 else min(ordered[-1] + 1, len(turns) - 1)
        if kind == "probe":
            if turns[i]["dia_id"] in evidence:  # evidence spans the whole conversation: no probe turn
                return question, ""
            return str(turns[i]["text"]), str(turns[i]["dia_id"])
    else:
        i = (ordered[0] + len(turns) // 2) % len(turns)
        while turns[i]["dia_id"] in evidence:
            i = (i + 1) % len(turns)
    return f"{turns[i]['text']} {question}", str(turns[i]["dia_id"])


SEPARATE_KINDS = ("shuffle", "alone")


def separate_units(units: list[Unit], how: str, seed: str) -> list[Unit]:
    """The units as separate event memories, the held-out Chinese set's condition (171 human-written
    events, none a turn of the dialogue before or after it), so that what recall reads from a
    conversation's order (the backbone lift and bridge, the beam along the backbone, the session prior
    over a day's memories) carries no signal:

    - ``shuffle``: the units in a seeded random order (``seed``: the conversation's id), one a day in
      that order, one source: each memory still has backbone neighbours and a day of its own, but they
      are unrelated to it, as consecutive events of a life mostly are;
    - ``alone``: the same order and days, each unit with a source of its own: no backbone edge at all
      (the backbone links a source's consecutive memories) and no day shared.

    A unit keeps its content and what it covers; its date and (``alone``) source change, so the
    (content, created_at) key stays unique."""
    import random

    if not units:
        return []
    order = list(range(len(units)))
    random.Random(f"separate:{seed}").shuffle(order)
    start = datetime.fromisoformat(min(u.created_at for u in units).replace("Z", "+00:00"))
    return [replace(units[i], created_at=_rfc3339(start + timedelta(days=day)),
                    source=f"{units[i].source}-{day}" if how == "alone" else units[i].source)
            for day, i in enumerate(order)]  # fmt: skip


def draft_of(units: list[Unit]) -> dict[str, Any]:
    items = [{"content": u.content, "created_at": u.created_at, "source": u.source} for u in units]
    return {"schema_version": "1", "insights": items}


# --- running the CLI ---------------------------------------------------------------------------


Key = tuple[str, str]  # an insight of a harness store: (content, created_at), unique per unit


@contextlib.contextmanager
def out_of_scope(key: Key | None, hole: bool = False) -> Any:
    """In this process only, while the block runs: recall's scope leaves out the stored insight(s) with
    this content and date, as if they were no memory (their BM25 df, cosine, entity match and graph
    reach go with the scope), and the pipeline reads the backbone as a store without them holds it
    (:func:`close_backbone`). The held-out probes' condition: a dialogue turn asked as a query is no
    memory of the store. A harness device, not a user-visible option: it wraps
    ``RetrievePipeline._scope``, the one place recall's scope is built, and ``mnemon.recall.run``.
    ``hole``: leave the backbone as stored (the turn's neighbours stay unlinked: the view before the
    sixth Chinese session, bench/quality-ablations.md)."""
    if key is None:
        yield
        return
    import mnemon.recall as pipeline
    from mnemon.engine.retrieve import RetrievePipeline
    from mnemon.store import insights

    original, original_run = RetrievePipeline._scope, pipeline.run
    gone: list[int] = []

    def scope(self: Any, index: Any, category: str, source: str) -> Any:
        rows = original(self, index, category, source)
        gone.clear()
        for found in insights.all_active(self.ctx.store.conn):
            if (found.content, found.created_at) == key and (row := index.row_of(found.id)) is not None:
                rows[row] = False
                gone.append(row)
        return rows

    def run(a: Any, *args: Any, **kwargs: Any) -> Any:
        return original_run(close_backbone(a, gone) if gone and not hole else a, *args, **kwargs)

    RetrievePipeline._scope = scope  # type: ignore[method-assign]
    pipeline.run = run
    try:
        yield
    finally:
        RetrievePipeline._scope = original  # type: ignore[method-assign]
        pipeline.run = original_run


def close_backbone(a: Any, gone: list[int]) -> Any:
    """The recall arrays ``a`` as a store without the rows ``gone`` holds them: each gone row's backbone
    neighbours are each other's prev / next and are joined by the temporal edge (both directions, the
    gone row's weight) that an import writes between consecutive memories. Out of scope only, a turn
    would leave a hole there: the memory after it has no predecessor to lend it the neighbour lift and
    no edge for the beam, which no store without the turn has (a probe's evidence is that very memory:
    29.4 with the hole against 42.2 without, the same as stores imported without the turn,
    bench/quality-ablations.md). Harness only: recall never needs it, a forgotten memory's neighbours
    are linked by the store."""
    import numpy as np

    from mnemon.records import EDGE_TYPES

    temporal = EDGE_TYPES.index("temporal")
    prev, nxt = np.array(a.prev, copy=True), np.array(a.next, copy=True)
    ptr, nbr, weight, kind, out = a.csr_ptr, a.csr_nbr, a.csr_weight, a.csr_type, a.csr_out
    added: dict[int, list[tuple[int, float, bool]]] = {}
    for row in gone:
        before, after = int(prev[row]), int(nxt[row])
        if before >= 0:
            nxt[before] = after
        if after >= 0:
            prev[after] = before
        if before < 0 or after < 0:
            continue
        own = slice(int(ptr[row]), int(ptr[row + 1]))
        links = (nbr[own] == before) & (kind[own] == temporal)
        w = float(weight[own][links][0]) if links.any() else 1.0
        for x, y in ((before, after), (after, before)):
            added.setdefault(x, []).extend([(y, w, True), (y, w, False)])
    if not added:
        return replace(a, prev=prev, next=nxt)
    new_ptr = np.array(ptr, copy=True)
    columns = [nbr, weight, kind, out]
    for row in sorted(added, reverse=True):  # from the end: the earlier rows' offsets stay valid
        at, entries = int(ptr[row + 1]), added[row]
        values = ([y for y, _, _ in entries], [w for _, w, _ in entries], [temporal] * len(entries),
                  [o for _, _, o in entries])  # fmt: skip
        columns = [np.insert(c, at, np.asarray(v, dtype=c.dtype)) for c, v in zip(columns, values, strict=True)]
        new_ptr[row + 1 :] += len(entries)
    return replace(a, prev=prev, next=nxt, csr_ptr=new_ptr, csr_nbr=columns[0], csr_weight=columns[1],
                   csr_type=columns[2], csr_out=columns[3])


def excluding_main() -> int:
    """``--mode cli`` with an insight out of scope: ``python -c`` runs this as the whole process,
    argv = [KEY_JSON, mnemon's argv...] (KEY_JSON: [content, created_at, hole]); the same CLI in a process
    of its own, the key out of scope."""
    from mnemon.cli import main

    content, created_at, hole = json.loads(sys.argv[1])
    with out_of_scope((content, created_at), hole):
        return main(sys.argv[2:])


_EXCLUDING = ("import sys; sys.path.append({root!r}); from bench.quality import excluding_main; "
              "sys.exit(excluding_main())")  # fmt: skip


class Runner:
    """Runs mnemon commands against one data dir, as whole processes or in this process."""

    def __init__(self, data_dir: Path, env: dict[str, str], mode: str, hole: bool = False) -> None:
        self.data_dir = data_dir
        self.env = env
        self.mode = mode
        self.hole = hole  # out_of_scope's: an excluded insight's neighbours left unlinked

    def __call__(self, *args: str, exclude: Key | None = None) -> tuple[float, str]:
        """``exclude``: an insight left out of recall's scope for this command (``out_of_scope``)."""
        argv = ["--data-dir", str(self.data_dir), *args]
        start = time.perf_counter()
        if self.mode == "cli":
            if exclude is not None and self.env.get("MNEMON_SERVER") == "require":
                raise ValueError("an insight out of scope needs one-shot processes (--server off)")
            # cwd outside any checkout: ``-m`` puts the cwd first on sys.path, which would shadow
            # the mnemon this interpreter has installed (or PYTHONPATH names).
            head = (["-m", "mnemon"] if exclude is None else
                    ["-c", _EXCLUDING.format(root=str(Path(__file__).resolve().parent.parent)),
                     json.dumps([*exclude, self.hole])])  # fmt: skip
            proc = subprocess.run([sys.executable, *head, *argv], capture_output=True, env=self.env,
                                  cwd=self.data_dir.parent)  # fmt: skip
            elapsed = time.perf_counter() - start
            if proc.returncode != 0:
                raise RuntimeError(f"mnemon {' '.join(args[:2])} failed: {proc.stderr.decode(errors='replace')}")
            return elapsed, proc.stdout.decode("utf-8")
        from mnemon.cli import main

        out = io.StringIO()
        saved = {k: os.environ.get(k) for k in self.env if k.startswith("MNEMON_")}
        os.environ.update({k: v for k, v in self.env.items() if k.startswith("MNEMON_")})
        try:
            with contextlib.redirect_stdout(out), out_of_scope(exclude, self.hole):
                code = main(argv)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        elapsed = time.perf_counter() - start
        if code != 0:
            raise RuntimeError(f"mnemon {' '.join(args[:2])} failed with status {code}")
        return elapsed, out.getvalue()


@dataclass
class Scores:
    recall: dict[int, list[float]] = field(default_factory=lambda: {k: [] for k in KS})
    mrr: list[float] = field(default_factory=list)

    def add(self, ranked: list[frozenset[str]], evidence: set[str]) -> None:
        for k in KS:
            covered = set().union(*ranked[:k]) if ranked[:k] else set()
            self.recall[k].append(len(evidence & covered) / len(evidence))
        first = next((i for i, c in enumerate(ranked) if c & evidence), None)
        self.mrr.append(0.0 if first is None else 1.0 / (first + 1))

    def extend(self, other: Scores) -> None:
        for k in KS:
            self.recall[k].extend(other.recall[k])
        self.mrr.extend(other.mrr)

    def row(self) -> list[str]:
        n = len(self.mrr)
        if n == 0:
            return ["0"] + ["-"] * (len(KS) + 1)
        return [str(n)] + [f"{100 * statistics.fmean(self.recall[k]):.1f}" for k in KS] + [f"{statistics.fmean(self.mrr):.3f}"]


@dataclass
class RunResult:
    units: str
    embed: str
    by_category: dict[int, Scores]
    latencies: list[float]
    per_question: list[dict[str, Any]]

    def headline(self, k: int = 10) -> float:
        values = [v for c in HEADLINE for v in self.by_category[c].recall[k]]
        return 100 * statistics.fmean(values) if values else 0.0


def out_of_scope_index(units_kind: str, units: list[Unit], borrowed: str, long: str, borrowed_out: bool) -> int | None:
    """The unit a long query's borrowed turn is, when it goes out of recall's scope: always for
    ``probe``, for ``far`` and ``prev`` with ``borrowed_out``; None otherwise, and in the facts view
    (a dialogue turn is no memory there: nothing to take out)."""
    if units_kind != "turns" or not borrowed or not (long == "probe" or borrowed_out):
        return None
    return next((i for i, u in enumerate(units) if u.covers == {borrowed}), None)


def run_conversation(sample: dict[str, Any], units_kind: str, env: dict[str, str], mode: str, limit: int,
                     root: Path, embed: str, long: str = "", foreign: list[dict[str, Any]] | None = None,
                     borrowed_out: bool = False, hole: bool = False,
                     separate: str = "", as_written: bool = False) -> tuple[dict[int, Scores], list[float], list[dict[str, Any]]]:  # fmt: skip
    units = units_of(sample, units_kind, as_written)
    if separate:
        units = separate_units(units, separate, str(sample.get("sample_id", "conv")))
    data_dir = root / f"{sample.get('sample_id', 'conv')}-{units_kind}-{embed}"
    run = Runner(data_dir, env, mode, hole)
    draft_path = root / f"{data_dir.name}.json"
    draft_path.write_text(json.dumps(draft_of(units)), encoding="utf-8")
    run("import", str(draft_path), "--no-diff")
    if embed == "local":
        _, out = run("embed", "--all")  # import embeds already; this only fills what it skipped
        status = json.loads(run("embed", "--status")[1])
        if status["embedded"] != status["total_insights"]:
            raise RuntimeError(f"embedding incomplete: {status}")
    # (content, created_at) is unique per unit: it maps a result back to the turns it covers.
    covers = {(u.content, u.created_at): u.covers for u in units}
    by_category = {c: Scores() for c in CATEGORIES}
    latencies: list[float] = []
    per_question = []
    turns = conversation_turns(sample)
    position = {str(t["dia_id"]): i for i, t in enumerate(turns)}
    for qa in sample["qa"]:
        evidence = evidence_ids(qa.get("evidence", []))
        category = int(qa["category"])
        if not evidence or category not in CATEGORIES:
            continue
        query, borrowed = (long_query(str(qa["question"]), evidence, turns, position, long, foreign) if long
                           else (str(qa["question"]), ""))  # fmt: skip
        left_out = out_of_scope_index(units_kind, units, borrowed, long, borrowed_out)
        exclude = None if left_out is None else (units[left_out].content, units[left_out].created_at)
        elapsed, out = run("recall", query, "--limit", str(limit + 1 if borrowed else limit), "--verbose",
                           exclude=exclude)  # fmt: skip
        latencies.append(elapsed)
        results = json.loads(out)["results"]
        ranked = [covers.get((r["insight"]["content"], r["insight"]["created_at"]), frozenset()) for r in results]
        if borrowed:
            ranked = [c for c in ranked if c != {borrowed}][:limit]
        by_category[category].add(ranked, evidence)
        per_question.append({"conv": str(sample.get("sample_id", "conv")), "q": qa["question"], "cat": category,
                             "evidence": sorted(evidence),
                             "ranked": [sorted(c) for c in ranked], "r10": by_category[category].recall[10][-1]})  # fmt: skip
    return by_category, latencies, per_question


def run_all(data: list[dict[str, Any]], units_kind: str, embed: str, mode: str, limit: int, model_path: str | None,
            server: str = "off", model: str | None = None, long: str = "", borrowed_out: bool = False,
            hole: bool = False, separate: str = "", as_written: bool = False) -> RunResult:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMON_")}
    # one kind of process per run: with the default "auto" a warm server would start part-way
    # through and the latency percentiles would mix served and one-shot calls
    env["MNEMON_SERVER"] = server
    env["MNEMON_MAX_INSIGHTS"] = "0"  # nothing pruned while loading
    env["MNEMON_EMBED_ENDPOINT"] = "http://127.0.0.1:9"  # no server: embedding-free unless local
    if embed == "local":
        env["MNEMON_EMBED_PROTOCOL"] = "local"
        if model_path:
            env["MNEMON_EMBED_MODEL_PATH"] = model_path
        if model:
            env["MNEMON_EMBED_MODEL"] = model
    by_category = {c: Scores() for c in CATEGORIES}
    latencies: list[float] = []
    per_question: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="mnemon-quality-") as tmp:
        for k, sample in enumerate(data):
            foreign = conversation_turns(data[(k + 1) % len(data)]) if len(data) > 1 else None
            cats, lat, pq = run_conversation(sample, units_kind, env, mode, limit, Path(tmp), embed, long, foreign,
                                             borrowed_out, hole, separate, as_written)  # fmt: skip
            for c, s in cats.items():
                by_category[c].extend(s)
            latencies.extend(lat)
            per_question.extend(pq)
    return RunResult(units_kind, embed, by_category, latencies, per_question)


# --- the plain baseline: BM25 over Han characters, Han bigrams and words ---------------------

_PLAIN_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # CJK unified ideographs, extension A, compatibility
_PLAIN_RUN = re.compile(rf"([{_PLAIN_HAN}]+)|([^\W_{_PLAIN_HAN}]+)")
_PLAIN_K1, _PLAIN_B = 1.2, 0.75


def plain_terms(text: str) -> list[str]:
    """Lower-cased words, and each Han run's characters and character bigrams: no stemming, no
    stopwords, nothing of mnemon's (its own tokenizer would make the baseline no baseline)."""
    out: list[str] = []
    for han, word in _PLAIN_RUN.findall(text.lower()):
        if han:
            out.extend(han)
            out.extend(han[i : i + 2] for i in range(len(han) - 1))
        else:
            out.append(word)
    return out


def plain_bm25_conversation(sample: dict[str, Any], units_kind: str, limit: int, long: str = "",
                            foreign: list[dict[str, Any]] | None = None,
                            borrowed_out: bool = False,
                            as_written: bool = False) -> tuple[dict[int, Scores], list[dict[str, Any]]]:  # fmt: skip
    """The baseline the Chinese targets are set against, on the same units and questions; equal
    scores keep the units' order (the conversation's). A borrowed turn out of mnemon's scope is out
    of this corpus too (its length and terms leave N, avgdl and df)."""
    import math
    from collections import Counter

    units = units_of(sample, units_kind, as_written)
    docs = [Counter(plain_terms(u.content)) for u in units]
    lengths = [sum(d.values()) for d in docs]
    avgdl = statistics.fmean(lengths) if lengths else 0.0
    df: Counter[str] = Counter()
    for d in docs:
        df.update(d.keys())
    n = len(docs)
    turns = conversation_turns(sample)
    position = {str(t["dia_id"]): i for i, t in enumerate(turns)}
    by_category = {c: Scores() for c in CATEGORIES}
    per_question: list[dict[str, Any]] = []
    for qa in sample["qa"]:
        evidence = evidence_ids(qa.get("evidence", []))
        category = int(qa["category"])
        if not evidence or category not in CATEGORIES:
            continue
        question, borrowed = (long_query(str(qa["question"]), evidence, turns, position, long, foreign) if long
                              else (str(qa["question"]), ""))  # fmt: skip
        query = set(plain_terms(question))
        left_out = out_of_scope_index(units_kind, units, borrowed, long, borrowed_out)
        gone: Counter[str] = Counter() if left_out is None else docs[left_out]
        n_in = n - (left_out is not None)
        avgdl_in = avgdl if left_out is None else (avgdl * n - lengths[left_out]) / max(n_in, 1)
        scores = []
        for i, d in enumerate(docs):
            if i == left_out:
                continue
            total = 0.0
            for t in query & d.keys():
                df_in = df[t] - (t in gone)
                idf = math.log(1 + (n_in - df_in + 0.5) / (df_in + 0.5))
                tf = d[t]
                total += idf * tf * (_PLAIN_K1 + 1) / (tf + _PLAIN_K1 * (1 - _PLAIN_B + _PLAIN_B * lengths[i] / avgdl_in))
            scores.append((-total, i))
        top = [i for s, i in sorted(scores) if s < 0 and units[i].covers != {borrowed}][:limit]
        by_category[category].add([units[i].covers for i in top], evidence)
        per_question.append({"conv": str(sample.get("sample_id", "conv")), "q": qa["question"], "cat": category,
                             "evidence": sorted(evidence), "ranked": [sorted(units[i].covers) for i in top],
                             "r10": by_category[category].recall[10][-1]})  # fmt: skip
    return by_category, per_question


def plain_bm25(data: list[dict[str, Any]], units_kind: str, limit: int, long: str = "",
               borrowed_out: bool = False, as_written: bool = False) -> RunResult:
    by_category = {c: Scores() for c in CATEGORIES}
    per_question: list[dict[str, Any]] = []
    for k, sample in enumerate(data):
        foreign = conversation_turns(data[(k + 1) % len(data)]) if len(data) > 1 else None
        cats, pq = plain_bm25_conversation(sample, units_kind, limit, long, foreign, borrowed_out, as_written)
        for c, scores in cats.items():
            by_category[c].extend(scores)
        per_question.extend(pq)
    return RunResult(units_kind, "plain BM25 over Han characters + bigrams (baseline)", by_category, [], per_question)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    pos = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[pos]


def table(result: RunResult) -> str:
    head = [f"### units={result.units}, embeddings={result.embed}", "",
            "| category | n | R@5 | R@10 | R@20 | MRR |", "|---|---|---|---|---|---|"]  # fmt: skip
    rows = [f"| {c} {CATEGORIES[c]} | " + " | ".join(result.by_category[c].row()) + " |" for c in CATEGORIES]
    headline = Scores()
    for c in HEADLINE:
        headline.extend(result.by_category[c])
    rows.append("| **1-4 headline** | " + " | ".join(headline.row()) + " |")
    lat = result.latencies
    tail = ["", f"recall latency ({len(lat)} calls): p50 {1000 * _percentile(lat, 0.5):.0f} ms, "
            f"p95 {1000 * _percentile(lat, 0.95):.0f} ms", ""]  # fmt: skip
    return "\n".join(head + rows + tail)


def per_conversation(result: RunResult) -> dict[str, dict[int, list[float]]]:
    """conversation -> category -> the R@10 of each of its questions (in order)."""
    out: dict[str, dict[int, list[float]]] = {}
    for pq in result.per_question:
        out.setdefault(pq["conv"], {c: [] for c in CATEGORIES})[pq["cat"]].append(pq["r10"])
    return out


def conversation_table(result: RunResult) -> str:
    """R@10 over categories 1-4 per conversation, their mean, and the question-weighted figure.

    A ranking change is judged on this table (bench/quality-ablations.md): it must raise the mean of
    the conversations and lower none by more than a point. The mean weighs each conversation once,
    so one long conversation cannot carry a change that the others do not share.
    """
    head = [f"#### per conversation, R@10 categories 1-4 (units={result.units}, embeddings={result.embed})", "",
            "| conversation | n | 1-4 | " + " | ".join(f"{c} {CATEGORIES[c]}" for c in HEADLINE) + " |",
            "|---|---|---|" + "---|" * len(HEADLINE)]  # fmt: skip
    rows, headlines = [], []
    for conv, cats in per_conversation(result).items():
        values = [v for c in HEADLINE for v in cats[c]]
        headline = 100 * statistics.fmean(values) if values else 0.0
        headlines.append(headline)
        per_cat = [f"{100 * statistics.fmean(cats[c]):.1f}" if cats[c] else "-" for c in HEADLINE]
        rows.append(f"| {conv} | {len(values)} | {headline:.1f} | " + " | ".join(per_cat) + " |")
    n = sum(len(result.by_category[c].mrr) for c in HEADLINE)
    mean = statistics.fmean(headlines) if headlines else 0.0
    blanks = " | ".join("" for _ in HEADLINE)
    rows.append(f"| **mean of {len(headlines)}** | {n} | **{mean:.1f}** | {blanks} |")
    rows.append(f"| all questions | {n} | {result.headline():.1f} | {blanks} |")
    return "\n".join(head + rows + [""])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", help="LoCoMo-format JSON (a list of conversations)")
    parser.add_argument("--units", choices=("turns", "facts"), default="turns")
    parser.add_argument("--embed", choices=("none", "local", "both"), default="none")
    parser.add_argument("--mode", choices=("cli", "inprocess"), default="cli")
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--model-path", default=os.environ.get("MNEMON_EMBED_MODEL_PATH"),
                        help="model directory for --embed local (default: $MNEMON_EMBED_MODEL_PATH)")  # fmt: skip
    parser.add_argument("--embed-model", help="--embed local: the model's name (MNEMON_EMBED_MODEL), e.g. "
                        "multilingual-e5-small (the multilingual extra); default all-MiniLM-L6-v2 or the path's")  # fmt: skip
    parser.add_argument("--server", choices=("off", "require"), default="off",
                        help="--mode cli: every recall one-shot (off, the default) or through the warm server")  # fmt: skip
    parser.add_argument("--baseline", action="store_true",
                        help="also score a plain BM25 over Han characters, Han bigrams and words on the same units")  # fmt: skip
    parser.add_argument("--long-query", choices=LONG_QUERY_KINDS, default="",
                        help="long queries: the question after a borrowed dialogue turn (long_query): of another "
                        "conversation (other), half this one away (far), or just before the evidence (prev)")  # fmt: skip
    parser.add_argument("--borrowed-out", action="store_true",
                        help="far/prev: the borrowed turn out of recall's scope too, as a probe's turn is no memory "
                        "(always so for probe)")  # fmt: skip
    parser.add_argument("--keep-hole", action="store_true",
                        help="a turn out of scope leaves its backbone neighbours unlinked, as before the sixth Chinese "
                        "session (default: linked, as a store without the turn holds them)")  # fmt: skip
    parser.add_argument("--separate", choices=SEPARATE_KINDS, default="",
                        help="the units as separate event memories (separate_units): shuffled one a day with their "
                        "backbone between unrelated memories (shuffle), or each with a source of its own, no backbone "
                        "(alone)")  # fmt: skip
    parser.add_argument("--as-written", action="store_true",
                        help="turns: each turn's text stored as written, without the speaker's name or a caption (a "
                        "data set whose turns are event memories, as an agent's remember calls store them)")  # fmt: skip
    parser.add_argument("--out", help="also write the markdown tables here")
    parser.add_argument("--dump", help="write per-question results (JSON) here, for error analysis")
    args = parser.parse_args(argv)

    data = json.loads(Path(args.data).read_text(encoding="utf-8"))
    embeds = ("none", "local") if args.embed == "both" else (args.embed,)
    parts = [f"Data: {Path(args.data).name} ({len(data)} conversations), mode {args.mode}, server {args.server}, "
             f"recall --limit {args.limit}" + (f", long queries ({args.long_query})" if args.long_query else "")
             + (", the borrowed turn out of scope" if args.borrowed_out or args.long_query == "probe" else "")
             + (" (its neighbours unlinked)" if args.keep_hole else "")
             + (f", units as separate memories ({args.separate})" if args.separate else "")
             + (", turns stored as written" if args.as_written else ""), ""]
    dumps = {}
    if args.baseline:
        plain = plain_bm25(data, args.units, args.limit, args.long_query, args.borrowed_out, args.as_written)
        baseline = table(plain).split("\n\nrecall latency")[0] + "\n\n" + conversation_table(plain)
        parts.append(baseline)
        dumps["baseline"] = plain.per_question
        print(baseline, flush=True)
    try:
        for embed in embeds:
            result = run_all(data, args.units, embed, args.mode, args.limit, args.model_path, args.server, args.embed_model,
                             args.long_query, args.borrowed_out, args.keep_hole, args.separate, args.as_written)  # fmt: skip
            report = table(result) + "\n" + conversation_table(result)
            parts.append(report)
            dumps[embed] = result.per_question
            print(report, flush=True)
    finally:
        if args.server == "require":  # leave no server behind (it would otherwise idle for 30 minutes)
            subprocess.run([sys.executable, "-m", "mnemon", "server", "stop"], capture_output=True, check=False)
    if args.out:
        Path(args.out).write_text("\n".join(parts), encoding="utf-8")
    if args.dump:
        Path(args.dump).write_text(json.dumps(dumps, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
