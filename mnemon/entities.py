"""Entity extraction and ``--entity-mode`` resolution (contract §4.3).

Owns the six regex paths, the tech dictionary, the acronym stopwords, the index-aware "fourth
path" that admits words already known as entities on active insights, and the
provided/auto/merge resolution used by ``remember``, ``import`` and recall's query entities.

The Go program uses RE2, whose ``\\b``, ``\\w`` and ``\\s`` are ASCII-only and whose ``$``
means end of text; the patterns below spell those classes out (``re.ASCII``, ``\\Z``,
``[\\t\\n\\f\\r ]``) so that non-ASCII text behaves exactly as it does there. Pure functions:
stdlib ``re`` only, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from mnemon.errors import InputError
from mnemon.records import ENTITY_MODES

__all__ = [
    "ACRONYM_STOPWORDS",
    "TECH_DICTIONARY",
    "extract_entities",
    "extract_known_entities",
    "resolve_entities",
]

TECH_DICTIONARY: frozenset[str] = frozenset(
    """
    Go Rust Python Java Kotlin Swift Ruby Elixir Zig Lua Dart Scala Perl Haskell OCaml Julia
    Clojure JavaScript TypeScript React Vue Angular Svelte Next Nuxt Node Deno Bun Vite Webpack
    SQLite PostgreSQL Postgres MySQL Redis MongoDB DynamoDB Cassandra Qdrant Milvus Chroma
    Pinecone Neo4j Weaviate Elasticsearch Docker Kubernetes Terraform Ansible Nginx Caddy Kafka
    RabbitMQ AWS GCP Azure Vercel Netlify Cloudflare Supabase Firebase Ollama OpenAI Claude
    Anthropic PyTorch TensorFlow LangChain LlamaIndex FAISS Hugging Git GitHub GitLab Cobra
    FastAPI Flask Django Rails Spring Express Gin Echo Fiber Pytest Jest Vitest gRPC GraphQL
    WebSocket OAuth JWT YAML TOML Protobuf MAGMA MCP RLM
    """.split()  # noqa: SIM905 -- a word list reads like the contract
)

# Short upper-case English words that the ALL-CAPS path would otherwise report ("THE", "AND").
ACRONYM_STOPWORDS: frozenset[str] = frozenset(
    """
    IN ON AT TO BY OR AN IF IS IT OF AS DO NO SO UP WE HE MY BE GO THE AND FOR ARE BUT NOT YOU
    ALL CAN HER WAS ONE OUR OUT HAS HAD HOW MAN NEW NOW OLD SEE WAY MAY SAY SHE TWO USE BOY DID
    GET HIM HIS LET PUT TOP TOO ANY
    """.split()  # noqa: SIM905 -- a word list reads like the contract
)

_RE2_SPACE = r"\t\n\f\r "  # RE2 \s: no \v, no Unicode spaces

# §4.3 paths 1-6 in order; each reports its last capture group.
_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"\b([A-Z][a-z]+(?:[A-Z][a-z]+)+)\b", re.ASCII),  # CamelCase: HttpServer
    re.compile(r"\b([A-Z]{2,6})\b", re.ASCII),  # ALL-CAPS: API, JWT; not the RPC in gRPC
    # File paths. The delimiters on both sides are consumed, so "a.go b.go" reports only
    # a.go: Go's non-overlapping FindAll has the same quirk and we keep it for parity.
    re.compile(rf"(?:^|[{_RE2_SPACE}\"'(])([.\w/-]+\.\w{{1,10}})(?:[{_RE2_SPACE}\"'),.]|\Z)", re.ASCII),
    re.compile(rf"(https?://[^{_RE2_SPACE}\"'<>)]+)", re.ASCII),  # URLs
    re.compile(r"@(\w+)", re.ASCII),  # @mention → the name
    re.compile(r"[《「]([^》」]+)[》」]"),  # 《三体》, 「引用」 → inner text
)

_DICTIONARY_SPLIT = re.compile(r"[^A-Za-z0-9]+")  # dictionary path: split on non-ASCII-alnum
_CAPITALIZED = re.compile(r"\b[A-Z][a-zA-Z0-9]+\b", re.ASCII)  # index-aware path (a)


def _dedupe(values: Iterable[str]) -> list[str]:
    """Drop empties and repeats, keeping the first occurrence's position."""
    return list(dict.fromkeys(v for v in values if v))


def _dictionary_words(text: str) -> list[str]:
    return [w for w in _DICTIONARY_SPLIT.split(text) if w]


def extract_entities(text: str) -> list[str]:
    """Return the entities §4.3 finds in ``text``: regex paths 1-6, then the dictionary.

    The result is de-duplicated (exact strings) in first-seen order; acronym stopwords are
    never entities. Dictionary lookups are case-sensitive ("Rust", not "rust").
    """
    found: list[str] = []
    for pattern in _PATTERNS:
        for match in pattern.finditer(text):
            entity = match.group(match.lastindex or 0)
            if entity not in ACRONYM_STOPWORDS:
                found.append(entity)
    found.extend(w for w in _dictionary_words(text) if w in TECH_DICTIONARY)
    return _dedupe(found)


def extract_known_entities(text: str, known: set[str] | frozenset[str]) -> list[str]:
    """Return the index-aware entities of ``text`` (§4.3 "fourth path").

    Capitalized tokens ``[A-Z][a-zA-Z0-9]+`` and then every dictionary-split word are admitted
    only if exactly present in ``known`` (the entity strings on active insights) and not
    acronym stopwords. This lets "Alpha" in a query meet insights tagged with entity "Alpha"
    although no regex path recognises it.
    """
    if not known:
        return []
    return [w for w in entity_candidates(text) if w in known]


def entity_candidates(text: str) -> list[str]:
    """Return the words the index-aware path would admit if they were known entities.

    The write path asks the store which of these few words are known, instead of loading
    every entity string of a large store (§4.3 "fourth path").
    """
    words = [m.group(0) for m in _CAPITALIZED.finditer(text)] + _dictionary_words(text)
    return _dedupe(w for w in words if w not in ACRONYM_STOPWORDS)


def resolve_entities(
    provided: list[str],
    text: str,
    mode: str,
    known: set[str] | frozenset[str] | None = None,
) -> list[str]:
    """Resolve an insight's entities by ``--entity-mode`` (§4.3).

    ``provided``: the given list only (empties dropped); ``auto``: extraction only; ``merge``:
    provided first, then extracted, de-duplicated. With ``known``, the index-aware entities
    join the extracted ones (after them). An unknown mode raises :class:`InputError`.
    """
    if mode not in ENTITY_MODES:
        raise InputError(f'invalid entity mode "{mode}"; valid: {", ".join(ENTITY_MODES)}')
    if mode == "provided":
        return [e for e in provided if e]
    extracted = extract_entities(text)
    if known:
        extracted = _dedupe([*extracted, *extract_known_entities(text, known)])
    if mode == "auto":
        return extracted
    return _dedupe([*provided, *extracted])
