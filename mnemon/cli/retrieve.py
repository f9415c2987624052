"""Retrieval commands: recall (smart, ``--basic``, ``--verbose``, ``--brief``) and search
(contract §3.4, §3.5). Parses flags, calls one Engine method, shapes the Go-compatible output.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Optional

import typer

from mnemon.cli.numflags import GO_INT
from mnemon.cli import render
from mnemon.cli.state import join_words, open_engine
from mnemon.validate import check_text
from mnemon.errors import InputError
from mnemon.records import CONFIDENCE_LOW_BELOW, CONFIDENCE_MEDIUM_BELOW, DEFAULT_EXCERPT_CHARS, DEFAULT_RECALL_LIMIT

if TYPE_CHECKING:
    from mnemon.engine.retrieve import RecallResult

Words = Optional[list[str]]
DETAIL_COMMAND = "mnemon show <id>"


def round_score(value: float) -> float:
    """Round to 3 decimals, half away from zero (Go's math.Round(x*1000)/1000)."""
    scaled = value * 1000.0
    return math.copysign(math.floor(abs(scaled) + 0.5), scaled) / 1000.0


def confidence(rounded: float) -> str:
    if rounded < CONFIDENCE_LOW_BELOW:
        return "low"
    if rounded < CONFIDENCE_MEDIUM_BELOW:
        return "medium"
    return "high"


def excerpt(text: str, n: int) -> str:
    """``--brief`` excerpt; mnemon.text (regex) is imported here, not at --help time."""
    from mnemon.text import excerpt as cut

    return cut(text, n)


def _check_brief(brief: bool, verbose: bool, excerpt_chars: int) -> None:
    if brief and verbose:
        raise InputError("--brief and --verbose cannot be used together")
    if brief and excerpt_chars <= 0:
        raise InputError("--excerpt-chars must be greater than 0")


def _brief(items: list[dict[str, Any]], hint: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"results": items}
    if hint:
        out["hint"] = hint
    if items:
        out["detail_command"] = DETAIL_COMMAND
    return out


def render_recall(result: RecallResult, *, verbose: bool, brief: bool, excerpt_chars: int) -> None:
    if verbose:
        results = []
        for hit in result.hits:
            item: dict[str, Any] = {
                "insight": hit.insight.to_json(), "score": hit.score, "intent": result.intent.value,
                "via": hit.via, "signals": hit.signals, "relevance": hit.relevance,
            }  # fmt: skip
            if hit.superseded:
                item["superseded"] = True
            results.append(item)
        meta: dict[str, Any] = {
            "intent": result.intent.value, "intent_source": result.intent_source,
            "anchor_count": result.anchor_count, "traversed": result.traversed,
        }  # fmt: skip
        if result.hint:
            meta["hint"] = result.hint
        render.emit_json({"results": results, "meta": meta})
        return
    if brief:
        items = []
        for hit in result.hits:
            score = round_score(hit.score)
            item = {
                "id": hit.insight.id, "excerpt": excerpt(hit.insight.content, excerpt_chars),
                "category": hit.insight.category, "score": score, "confidence": confidence(score),
                "relevance": hit.relevance,
            }  # fmt: skip
            if hit.superseded:
                item["superseded"] = True
            items.append(item)
        render.emit_json(_brief(items, result.hint), pretty=False, html_escape=False)
        return
    compact = []
    for hit in result.hits:
        score = round_score(hit.score)
        entry: dict[str, Any] = {"id": hit.insight.id, "content": hit.insight.content}
        if hit.insight.category:
            entry["category"] = hit.insight.category
        if hit.insight.importance:
            entry["importance"] = hit.insight.importance
        entry["intent"] = result.intent.value
        if hit.via:
            entry["matched_via"] = hit.via
        entry["confidence"] = confidence(score)
        entry["score"] = score
        if hit.superseded:
            entry["superseded"] = True
        compact.append(entry)
    out: dict[str, Any] = {"results": compact}
    if result.hint:
        out["hint"] = result.hint
    render.emit_json(out)


def recall(
    ctx: typer.Context,
    words: Words = typer.Argument(None, help="query words (joined with spaces)"),
    limit: int = typer.Option(DEFAULT_RECALL_LIMIT, "--limit", click_type=GO_INT, help="maximum results"),
    cat: str = typer.Option("", "--cat", help="only this category"),
    source: str = typer.Option("", "--source", help="only this source"),
    basic: bool = typer.Option(False, "--basic", help="plain substring match instead of smart recall"),
    intent: str = typer.Option("", "--intent", help="WHY|WHEN|ENTITY|GENERAL (overrides detection)"),
    verbose: bool = typer.Option(False, "--verbose", help="full insights, signals and meta"),
    smart: bool = typer.Option(False, "--smart", hidden=True, help="accepted for compatibility (default)"),
    brief: bool = typer.Option(False, "--brief", help="single-line JSON with excerpts"),
    excerpt_chars: int = typer.Option(DEFAULT_EXCERPT_CHARS, "--excerpt-chars", click_type=GO_INT, help="excerpt length for --brief"),
) -> None:
    """Recall insights relevant to a query (smart by default)."""
    query = check_text(join_words(words), "query")
    check_text(cat, "category")
    check_text(source, "source")
    _check_brief(brief, verbose, excerpt_chars)
    if limit < 1:
        raise InputError(f"--limit must be at least 1, got {limit}")
    if basic:
        with open_engine(ctx.obj) as engine:
            found = engine.recall_basic(query, limit=limit, category=cat, source=source)
        if brief:
            items = [{"id": i.id, "excerpt": excerpt(i.content, excerpt_chars), "category": i.category} for i in found]
            render.emit_json(_brief(items, None), pretty=False, html_escape=False)
        else:
            render.emit_json([i.to_json() for i in found])
        return
    if intent:
        from mnemon.intent import parse_intent

        parse_intent(intent)  # reject before opening the store
    with open_engine(ctx.obj) as engine:
        result = engine.recall(query, limit=limit, category=cat, source=source, intent=intent or None)
    render_recall(result, verbose=verbose, brief=brief, excerpt_chars=excerpt_chars)


def search(
    ctx: typer.Context,
    words: Words = typer.Argument(None, help="query words (joined with spaces)"),
    limit: int = typer.Option(DEFAULT_RECALL_LIMIT, "--limit", click_type=GO_INT, help="maximum results"),
    brief: bool = typer.Option(False, "--brief", help="single-line JSON with excerpts"),
    excerpt_chars: int = typer.Option(DEFAULT_EXCERPT_CHARS, "--excerpt-chars", click_type=GO_INT, help="excerpt length for --brief"),
) -> None:
    """Keyword search over every active insight."""
    query = check_text(join_words(words), "query")
    _check_brief(brief, False, excerpt_chars)
    if limit < 1:
        raise InputError(f"--limit must be at least 1, got {limit}")
    with open_engine(ctx.obj) as engine:
        hits = engine.search(query, limit=limit)
    if brief:
        items = [
            {"id": h.insight.id, "excerpt": excerpt(h.insight.content, excerpt_chars), "category": h.insight.category,
             "score": h.score}
            for h in hits
        ]  # fmt: skip
        render.emit_json(_brief(items, None), pretty=False, html_escape=False)
        return
    render.emit_json([
        {"id": h.insight.id, "content": h.insight.content, "category": h.insight.category,
         "importance": h.insight.importance, "tags": list(h.insight.tags), "score": h.score}
        for h in hits
    ])  # fmt: skip


def register(app: typer.Typer) -> None:
    app.command("recall")(recall)
    app.command("search")(search)
