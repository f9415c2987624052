"""Tokenizer, recall stemmer, set similarity measures and UTF-8 length helpers.

Owns contract §4.1 (``Tokenize``: lower-case, Han bigrams, letter/digit words, 80 English
stopwords), the set measures of §4.2 (keyword score, token overlap, content similarity,
Jaccard), the recall-only stemmer of Decision 13 (Snowball English) with the BM25 term sequences of
Decision 12, and the byte/code-point helpers the CLI needs for Go-compatible limits and
``--brief`` excerpts (§3.3, §3.4, §8).

Pure functions: imports only ``regex`` (for ``\\p{Han}`` and Unicode categories), ``mnemon.errors``
and, on the first word to stem, ``Stemmer`` (PyStemmer); no numpy, no I/O, no clock. The diff, causal and
semantic-fallback measures use :func:`tokenize` unstemmed so that their thresholds keep the
meaning they have in the Go program (Decision 13).
"""

from __future__ import annotations

from collections.abc import Iterable
import threading
from functools import lru_cache
from typing import Any

import regex

from mnemon.errors import LibraryMissingError

__all__ = [
    "POSSESSIVE_TERM",
    "STOPWORDS",
    "byte_len",
    "content_similarity",
    "derived_query_terms",
    "excerpt",
    "identifier_terms",
    "insight_tokens",
    "insight_views",
    "irregular_query_terms",
    "jaccard",
    "keyword_score",
    "possessor_query_terms",
    "query_name_terms",
    "recall_insight_terms",
    "recall_query_terms",
    "recall_sequence",
    "recall_terms",
    "require_stemmer",
    "stem",
    "token_overlap",
    "token_sequence",
    "tokenize",
    "truncate_bytes",
    "vocabulary_words",
]

# §4.1: the 80 English stopwords, dropped from words (Han bigrams can never match them).
STOPWORDS: frozenset[str] = frozenset(
    """
    a an the is are was were be been being have has had do does did will would could should may
    might shall can to of in for on with at by from as into about that this it its or and but if
    not no so up out than then too very just also more some any all each i me my we you your he
    she they them his her our their what which who how when where
    """.split()  # noqa: SIM905 -- a word list reads like the contract
)

# One alternation per run kind. Han is the Unicode *script* (Go's unicode.Han), not
# Script_Extensions, so the ideographic comma 、 ends a run. Words are letters (L*) and
# decimal digits (Nd only, Go's unicode.IsDigit) that are not Han; everything else, combining
# marks included, separates tokens (§4.1: marks split Devanagari/Bengali words, kept for parity).
_RUN = regex.compile(r"(\p{Script=Han}+)|([[\p{L}\p{Nd}]--\p{Script=Han}]+)", regex.V1)
_HAN = regex.compile(r"\p{Script=Han}")

# Characters whose Python full lower-casing differs from Go's per-rune simple mapping:
# U+0130 lowers to "i" + U+0307 in Python (the mark would split the word) and capital sigma
# becomes final sigma ς at word ends. Go yields "i" and σ.
_GO_LOWER_EXCEPTIONS = {"\u0130": "i", "\u03a3": "\u03c3"}


def _go_lower(text: str) -> str:
    """Lower-case rune by rune as Go's ``strings.ToLower`` does."""
    if "\u0130" not in text and "\u03a3" not in text:
        return text.lower()
    return "".join(_GO_LOWER_EXCEPTIONS.get(ch) or ch.lower() for ch in text)


def token_sequence(text: str) -> list[str]:
    """Return the §4.1 tokens of ``text`` in order, with repeats, stopwords dropped.

    A Han run of two or more characters yields its overlapping bigrams, a lone Han character
    yields itself. This sequence gives BM25 its term frequencies and document length
    (Decision 12); :func:`tokenize` is its set.
    """
    return _sequence(text, han_characters=False)


def _sequence(text: str, *, han_characters: bool) -> list[str]:
    """The one tokenizing loop: words without stopwords, Han bigrams (a lone character as itself) and,
    with ``han_characters``, a Han run's single characters after its bigrams."""
    out: list[str] = []
    for match in _RUN.finditer(_go_lower(text)):
        han = match.group(1)
        if han is None:
            word = match.group(2)
            if word not in STOPWORDS:
                out.append(word)
        elif len(han) == 1:
            out.append(han)
        else:
            out.extend(han[i : i + 2] for i in range(len(han) - 1))
            if han_characters:
                out.extend(han)
    return out


def tokenize(text: str) -> set[str]:
    """Return the §4.1 token set of ``text`` (Go ``Tokenize``)."""
    return set(token_sequence(text))


def insight_tokens(content: str, tags: Iterable[str], entities: Iterable[str]) -> set[str]:
    """Return tokens(content) ∪ tokens(each tag) ∪ tokens(each entity) (§4.1).

    Each field is tokenized on its own, so a Han bigram never spans two fields.
    """
    tokens = tokenize(content)
    for field in (*tags, *entities):
        tokens |= tokenize(field)
    return tokens


# --- Decision 13: suffix stemming for recall -------------------------------------------------

_STEM_MIN_LETTERS = 4  # only tokens of at least this many ASCII letters are stemmed
_ENGLISH = threading.local()  # a Stemmer object is not thread-safe: one per thread


def _english_stemmer() -> Any:
    stemmer = getattr(_ENGLISH, "stemmer", None)
    if stemmer is None:
        # imported on the first word to stem, not with the module: a call that stems nothing
        # (status, --help) does not load it
        try:
            import Stemmer
        except ImportError as e:  # a partial install (an upgrade that skipped the new dependency)
            raise LibraryMissingError(
                "PyStemmer is not installed (recall's English stemmer): pip install PyStemmer, or reinstall mnemon"
            ) from e

        stemmer = _ENGLISH.stemmer = Stemmer.Stemmer("english")
    return stemmer


def require_stemmer() -> None:
    """Load the stemmer now, or raise :class:`LibraryMissingError`: a write checks this before it
    writes, since the derived index it catches up after the commit stems every new memory's words
    (a failure there would report an error for a memory already stored)."""
    _english_stemmer()


@lru_cache(maxsize=1 << 16)  # vocabularies are small and BM25 indexing stems every token
def stem(token: str) -> str:
    """Return the Decision 13 recall stem of one token: the Snowball English stemmer (Porter2).

    Only ASCII alphabetic tokens of at least 4 letters change; Han bigrams, digits and short
    words pass through. Porter2 (PyStemmer, the Snowball project's C build) removes inflections
    and derivations alike, so "paint", "paints", "painted", "painting" → "paint" and "adopt",
    "adopted", "adoption" → "adopt". It is applied once and never lengthens a word; it is not
    idempotent ("conversation" → "convers" → "conver"), so a stem is never stemmed again.

    It replaced a light -s/-ed/-ing/-ly/-e stripper of our own: English recall rose in the four
    target views on five development conversations (no conversation lower by a point) and on four
    written from scratch that nothing was tuned on (bench/quality-ablations.md, thirteenth session).
    """
    if len(token) < _STEM_MIN_LETTERS or not (token.isascii() and token.isalpha()):
        return token
    return _STEM_OVERRIDES.get(token) or str(_english_stemmer().stemWord(token))


# Porter2 takes "-ed" off a base that merely ends in it ("embed" → "emb") while "embedded" and
# "embedding" keep "embed": a word this tool's users write often, joined to its forms here.
_STEM_OVERRIDES = {"embed": "embed", "embeds": "embed"}


def recall_sequence(text: str, sequence: list[str] | None = None) -> list[str]:
    """Return the unstemmed BM25 token sequence of ``text``: :func:`token_sequence` plus, for
    every Han run of two or more characters, its single characters after its bigrams.

    Recall only (the §4.1 measures keep their bigram tokens): a Chinese question rarely repeats a
    memory's exact character pairs ("限流" against "限制流量"), while the characters match; BM25's
    idf keeps the common ones ("的", "我") weak. ``sequence``: ``token_sequence(text)`` when the
    caller has it, reused as is for text without Han.
    """
    if sequence is not None and not _HAN.search(text):
        return sequence
    return _sequence(text, han_characters=True)


# Recall only: an identifier written in camel case ("OrderRouter", "getHTTPResponse") is one §4.1 token,
# so "the order router" never met it. Its words are terms too ("order", "router"), as an identifier in snake
# or kebab case ("order_router") is split by the tokenizer already; like a tag's terms they count once and
# leave the memory's length alone (Decision 12), so text without such identifiers scores as before.
# ASCII only, starting with a letter ("23P01" is a code); a part of one letter, a number ("OAuth2Client": "auth",
# "client") or a stopword is no term ("iPhone" adds "phone").
_IDENTIFIER_HINT = regex.compile(r"[a-z0-9][A-Z]|[A-Z]{2}[a-z]")  # a case change inside a word
_IDENTIFIER_PART = regex.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")  # digits: a part, never a term


@lru_cache(maxsize=1 << 12)  # a store names the same few identifiers over and over
def _identifier_words(word: str) -> tuple[str, ...]:
    parts = [p.lower() for p in _IDENTIFIER_PART.findall(word)]
    return tuple(stem(p) for p in parts if len(p) > 1 and p.isalpha() and p not in STOPWORDS)


def identifier_terms(text: str) -> list[str]:
    """Return the stems of the words of ``text``'s camel-case identifiers, each once, in order.

    "Switched OrderRouter to HTTPServer" → ["order", "router", "http", "server"]; "YouTube" → ["tube"];
    "pH", "23P01", "order_router", "naïveOrderRouter" → [] (no part of two letters; a code; no camel case; not
    ASCII).
    """
    out: list[str] = []
    done = 0
    for hint in _IDENTIFIER_HINT.finditer(text):  # from each case change out to the word's ends
        if hint.start() < done:
            continue  # a second case change of a word already read
        start, stop = hint.start(), hint.end()
        while start > 0 and _ascii_alnum(text[start - 1]):
            start -= 1
        while stop < len(text) and _ascii_alnum(text[stop]):
            stop += 1
        done = stop
        if not text[start].isalpha() or _glued(text, start - 1) or _glued(text, stop):
            continue  # a code ("23P01"), or part of a longer word with other letters ("naïveOrderRouter")
        for term in _identifier_words(text[start:stop]):
            if term not in out:
                out.append(term)
    return out


def _ascii_alnum(ch: str) -> bool:
    return ch.isascii() and ch.isalnum()


def _glued(text: str, i: int) -> bool:
    """Whether ``text[i]`` (outside an ASCII word) continues it as the tokenizer reads words: a letter
    or digit that is not Han (a Han run ends a word, _RUN)."""
    return 0 <= i < len(text) and text[i].isalnum() and _HAN.match(text[i]) is None


def recall_terms(text: str) -> list[str]:
    """Return the stemmed BM25 token sequence of ``text`` with repeats (Decision 12/13; Han
    characters as well as bigrams, :func:`recall_sequence`)."""
    return [stem(token) for token in recall_sequence(text)]


# Query side only: Chinese question words and particles, the counterpart of the English
# stopwords "what", "when", "which", "who", "how"... that §4.1 drops. Left in, "什么时候" ("when")
# gives a question the terms 什么, 么时, 时候, 什, 么, 时, 候, which match memories that ask
# something, not the ones that answer; replaced by a space, they also end the Han run, so no bigram
# spans them ("受伤的" keeps 受伤, loses 伤的). Longest first; Simplified and Traditional forms.
_CHINESE_QUESTION_WORDS = regex.compile(
    "什么时候|什麼時候|甚麼時候|为什么|為什麼|為甚麼|什么样|什麼樣|什么|什麼|甚麼|何时|何時"
    "|哪些|哪里|哪裡|哪儿|哪兒|哪个|哪個|哪种|哪種|哪类|哪類|哪|怎么样|怎麼樣|怎么|怎麼|怎样|怎樣|如何"
    "|谁|誰|多少|几|幾|吗|嗎|呢|吧|的|了|是"
)


def recall_query_terms(text: str) -> list[str]:
    """Return a recall query's own BM25 terms (:func:`recall_terms`; the query-side rules below add
    to them) without its Chinese question words and particles, then its identifiers' words
    (:func:`identifier_terms`) it does not have already. A rule that left prepositional
    phrases ("with respect to", ...) out was removed: on the five development conversations it
    changed no R@10 in any view (bench/quality-ablations.md)."""
    terms = recall_terms(_CHINESE_QUESTION_WORDS.sub(" ", text))
    return terms + [term for term in identifier_terms(text) if term not in terms]


# A word whose vector a model gives for a neighbour term (records.TERM_NEIGHBOURS): ASCII letters, an apostrophe or
# hyphen inside ("caroline's", "dairy-free": a surface form whose stem no BM25 term has, so it never becomes one).
_VOCABULARY_WORD = regex.compile(r"[A-Za-z][A-Za-z'-]*[A-Za-z]")


def vocabulary_words(text: str) -> list[str]:
    """The distinct words of ``text`` a neighbour term is sought for or among (records.TERM_NEIGHBOURS), in
    the order they first occur, lower-cased: ASCII words of at least three letters that are no stopword."""
    out: dict[str, None] = {}
    for match in _VOCABULARY_WORD.finditer(text):
        word = match.group(0).lower()
        if len(word) >= 3 and word not in STOPWORDS:
            out[word] = None
    return list(out)


def written_in_han(text: str) -> bool:
    """Whether ``text`` is mostly Chinese (or Japanese kanji): its Han characters, two to a word (a
    Chinese word is one to three characters), outnumber its other words. "Caroline什么时候去参加LGBTQ
    支持小组的？" is (six to two), "What does 缓存 mean?" is not."""
    han = words = 0
    for match in _RUN.finditer(text):
        if match.group(1) is not None:
            han += len(match.group(1))
        else:
            words += 1
    return han > 2 * words


def query_length(terms: Iterable[str]) -> int:
    """How long a query is: its distinct words and its distinct Han characters, a character counting as a
    word (records.LONG_QUERY_TERMS says why not half of one).

    A Han run's character bigrams are left out: they are extra views of the same characters, and
    counting them made a 13-character Chinese question as long as a 24-word English one
    (records.LONG_QUERY_TERMS)."""
    words = chars = 0
    for term in set(terms):
        if len(term) == 1 and _HAN.match(term):
            chars += 1
        elif not (len(term) == 2 and _HAN.match(term) and _HAN.match(term, 1)):
            words += 1  # a Han bigram is two characters already counted
    return words + chars


# Query side only: the "s" of a possessive ("Melanie's" tokenizes to "melanie", "s") is a term of
# its own, and a rare-ish one, so "Melanie's plans" would match "Caroline's plans" on it. The
# engine lets the query's "s" count only for memories that also have one of the words it is
# attached to (engine.retrieve._bm25); these are those words' terms. Contractions of stopwords
# ("it's", "what's", "she's") have no such word, so a query with only those keeps its "s" as before.
POSSESSIVE_TERM = "s"
_POSSESSIVE = regex.compile(r"([\p{L}\p{Nd}]+)['\u2019]s(?![\p{L}\p{Nd}])", regex.IGNORECASE)


def possessor_query_terms(text: str) -> list[str]:
    """Return the terms of the words that carry a possessive "'s" in ``text``, each once, in order.

    "What are Melanie's plans?" → ["melani"]; "Jon’s and Gina's" → ["jon", "gina"]; "it's" → []
    (a stopword has no term). Read on the same text as :func:`recall_query_terms`.
    """
    out: list[str] = []
    for match in _POSSESSIVE.finditer(text):
        for term in recall_terms(match.group(1)):
            if term not in out:
                out.append(term)
    return out


# Query side only: the proper names a query writes, for subject agreement (engine.retrieve, records.
# SUBJECT_MISMATCH_FACTOR_*). A name is a capitalised word (an upper-case then a lower-case letter)
# that does not start the query or a sentence of it: "What did Melanie paint?" names Melanie, while
# "What" and "Paint the fence" start their sentences. In a query written in Han characters
# (written_in_han) a capitalised Latin word is a name wherever it stands: Chinese has no sentence case,
# and its subject opens the question ("Melanie什么时候画了日出？", as "When did Melanie paint a sunrise?"
# names her later). Scripts without case (Chinese names) name nothing here. Whether a name is one of the
# store's frequent ones is the engine's to decide (its postings).
_CAPITALISED = regex.compile(
    r"(?<![[\p{L}\p{Nd}]--\p{Script=Han}])\p{Lu}\p{Ll}[\p{L}--\p{Script=Han}]*(?![[\p{L}\p{Nd}]--\p{Script=Han}])",
    regex.V1,
)  # a word ends where a Han run starts, as in the tokenizer (_RUN): "我和Caroline去了" names Caroline
_SENTENCE_END = frozenset(".?!\u2026\u3002\uff1f\uff01")
_OPENERS = " \t\r\n\"'([\u201c\u2018"


def query_name_terms(text: str) -> list[str]:
    """Return the terms of the capitalised words of ``text`` that start no sentence (any, in a text
    written in Han characters), each once, in order.

    "When did Caroline meet Melanie's friends?" → ["carolin", "melani"]; "Caroline's plans?" → [] (the
    first word); "Why? Because Jon left." → ["jon"]; a stopword ("The" mid-sentence) has no term;
    "Gina如何描述Jon开的工作室？" → ["gina", "jon"] (written in Han: no sentence case to skip).
    """
    out: list[str] = []
    caseless = written_in_han(text)
    for match in _CAPITALISED.finditer(text):
        before = text[: match.start()].rstrip(_OPENERS)
        if not caseless and (not before or before[-1] in _SENTENCE_END):
            continue
        for term in recall_terms(match.group(0)):
            if term not in out:
                out.append(term)
    return out


# Query side only: a noun made from a verb or adjective ("adoption", "mentorship", "happiness")
# rarely shares its stem with the words a memory uses ("adopted", "mentored", "happy"). The
# query also asks for the root's stem, at a reduced BM25 weight (records.QUERY_DERIVED_WEIGHT).
# Memories are indexed exactly as before (Decision 13), so no stored or derived data changes.
# Longest suffix first; the root must keep at least 4 letters ("nation" is not "nat" + -ion).
_NOUN_SUFFIXES = ("ation", "ship", "ment", "ness", "ion")
_DERIVED_ROOT_MIN_LETTERS = 4


def derived_query_terms(text: str) -> list[str]:
    """Return the stems of the roots of ``text``'s derived nouns that its own terms lack.

    "adoption" → "adopt", "mentorship" → "mentor", "presentation" → "present" and "presentat";
    in order of appearance, each once, never a term :func:`recall_query_terms` already yields. The
    suffix is taken off the stemmed token, so plurals count too ("adoptions" → "adopt").
    """
    own = recall_query_terms(text)
    out: list[str] = []
    for token in own:
        if not (token.isascii() and token.isalpha()):
            continue
        for suffix in _NOUN_SUFFIXES:
            root = token[: -len(suffix)]
            if token.endswith(suffix) and len(root) >= _DERIVED_ROOT_MIN_LETTERS:
                term = stem(root)
                if term not in out and term not in own:
                    out.append(term)
    return out


# Query side only: an irregular verb's other forms. A question asks "did X meet / find / win ...", a
# memory tells what X "met / found / won": the -ed/-ing stemmer (Decision 13) cannot join them. The
# query also asks for the other forms' stems at a reduced BM25 weight (records.QUERY_IRREGULAR_WEIGHT),
# as it does a derived noun's root; memories are indexed as before. One entry per verb: base, past,
# past participle (a form the same in all three is written once). Forms that are as often a noun,
# an adjective or another verb's form ("left", "found", "felt", "saw", "rose") ask nothing more.
_IRREGULAR_VERBS = """arise arose arisen; awake awoke awoken; bear bore born borne; beat beaten; become became;
begin began begun; bend bent; bind bound; bite bit bitten; bleed bled; blow blew blown; break broke broken;
breed bred; bring brought; build built; burn burnt; buy bought; catch caught; choose chose chosen; cling clung;
come came; creep crept; deal dealt; dig dug; draw drew drawn; dream dreamt; drink drank drunk; drive drove driven;
eat ate eaten; fall fell fallen; feed fed; feel felt; fight fought; find found; flee fled; fly flew flown;
forbid forbade forbidden; forget forgot forgotten; forgive forgave forgiven; freeze froze frozen; get got gotten;
give gave given; go went gone; grind ground; grow grew grown; hang hung; hear heard; hide hid hidden; hold held;
keep kept; kneel knelt; know knew known; lay laid; lead led; lean leant; leap leapt; learn learnt; leave left;
lend lent; light lit; lose lost; make made; mean meant; meet met; pay paid; prove proven; ride rode ridden;
ring rang rung; rise rose risen; run ran; say said; see saw seen; seek sought; sell sold; send sent;
shake shook shaken; shine shone; shoot shot; show shown; shrink shrank shrunk; sing sang sung; sink sank sunk;
sit sat; sleep slept; slide slid; speak spoke spoken; speed sped; spend spent; spin spun; spring sprang sprung;
stand stood; steal stole stolen; stick stuck; sting stung; strike struck; strive strove striven; swear swore sworn;
sweep swept; swim swam swum; swing swung; take took taken; teach taught; tear tore torn; tell told; think thought;
throw threw thrown; understand understood; wake woke woken; wear wore worn; weave wove woven; weep wept; win won;
wind wound; withdraw withdrew withdrawn; write wrote written"""
_AMBIGUOUS_FORMS = frozenset(
    "rose saw lay bore wound ground left found felt fell light lit bound lead mean tear wind spring sped sink fed"
    " lean stick beat run".split()
)

_IRREGULAR_WORD = regex.compile(r"[A-Za-z]+")


@lru_cache(maxsize=1)
def _irregular_verbs() -> dict[str, tuple[str, ...]]:
    """Each irregular form → its verb's forms (base first). Stemmed per query, for the verbs it writes only:
    stemming the whole table would cost a one-shot recall more than the rest of this query side."""
    out: dict[str, tuple[str, ...]] = {}
    for entry in _IRREGULAR_VERBS.split(";"):
        forms = tuple(entry.split())
        for form in forms:
            out[form] = out.get(form, ()) + forms
    return out


def _verb_stems(forms: tuple[str, ...]) -> set[str]:
    """The stems of a verb's forms (``forms[0]`` its base) and of its base's -s form. Its -ing form
    stems to the base's stem ("winning", "making", "lying" → "win", "make", "lie"); writing it as
    base + "ing" would not ("wining" → "wine")."""
    base = forms[0]
    return {stem(form) for form in forms if form not in STOPWORDS} | {stem(base + "s")}


def irregular_query_terms(text: str) -> list[str]:
    """Return the stems of the other forms of ``text``'s irregular verbs that its own terms lack.

    "When did Maria meet Jean?" → ["met"]; "What did Nate win?" → ["won"]; "Where did she go?" → ["gon",
    "gos", "went"] (sorted per verb, in order of appearance, each once). A form listed as ambiguous
    ("found", "left", "saw") adds nothing.
    """
    table = _irregular_verbs()
    words = [w for w in (word.lower() for word in _IRREGULAR_WORD.findall(text)) if w in table]
    if not words:
        return []
    own = set(recall_query_terms(text))
    out: list[str] = []
    for word in words:
        if word in _AMBIGUOUS_FORMS:
            continue
        for term in sorted(_verb_stems(table[word]) - {stem(word)}):
            if term not in own and term not in out:
                out.append(term)
    return out


def recall_insight_terms(content: str, tags: Iterable[str], entities: Iterable[str]) -> list[str]:
    """Return an insight's BM25 terms: content terms, then its identifiers' words and the
    tag/entity-only terms once each.

    Decision 12: tf and document length come from the content's sequence; a term present only
    through tags, entities or an identifier's words counts tf = 1 however many fields carry it.
    """
    terms = recall_terms(content)
    seen = set(terms)
    fields = [recall_terms(field) + identifier_terms(field) for field in (*tags, *entities)]
    for term in (term for extra in (identifier_terms(content), *fields) for term in extra):
        if term not in seen:
            seen.add(term)
            terms.append(term)
    return terms


def insight_views(
    content: str, tags: Iterable[str], entities: Iterable[str], sequence: list[str] | None = None,
    fields: dict[str, tuple[list[str], list[str]]] | None = None,
) -> tuple[list[str], dict[str, None], int]:
    """``(recall_insight_terms(...), insight_tokens(...), len(recall_terms(content)))`` with each
    field tokenised once: what the hot index stores per insight (a 1M-row build tokenises 1M texts).
    ``sequence``: ``token_sequence(content)`` when the caller has it already (an import's).
    ``fields``: a memo of tag and entity texts' (tokens, terms) the caller keeps over many rows
    (the same few hundred entity names recur across thousands of insights)."""
    if sequence is None:
        sequence = token_sequence(content)
    recall = recall_sequence(content, sequence)
    terms = [stem(token) for token in recall]
    seen = set(terms)
    for term in identifier_terms(content):  # counted once, not in the length (above)
        if term not in seen:
            seen.add(term)
            terms.append(term)
    # the plain tokens in first-seen order (a dict, not a set): the order new term ids are given
    # in, so that an index built twice is the same file whatever the process's hash seed
    plain = dict.fromkeys(sequence)
    for field in (*tags, *entities):
        views = fields.get(field) if fields is not None else None
        if views is None:
            field_tokens = token_sequence(field)
            views = (field_tokens, [*map(stem, recall_sequence(field, field_tokens)), *identifier_terms(field)])
            if fields is not None:
                fields[field] = views
        plain.update(dict.fromkeys(views[0]))
        for term in views[1]:
            if term not in seen:
                seen.add(term)
                terms.append(term)
    return terms, plain, len(recall)


# --- §4.2 set measures -----------------------------------------------------------------------


def keyword_score(query: set[str], tokens: set[str]) -> float:
    """Return |Q∩T| / |Q| (§4.2 keyword search; 0 when Q is empty)."""
    if not query:
        return 0.0
    return len(query & tokens) / len(query)


def token_overlap(a: set[str], b: set[str]) -> float:
    """Return |A∩B| / max(|A|, |B|) (§4.2, the causal-edge overlap; 0 when either is empty)."""
    if not a or not b:
        return 0.0
    return len(a & b) / max(len(a), len(b))


def content_similarity(a: set[str], b: set[str]) -> float:
    """Return max(|A∩B|/|A|, |A∩B|/|B|) (§4.2 semantic fallback; 0 when either is empty)."""
    if not a or not b:
        return 0.0
    shared = len(a & b)
    return max(shared / len(a), shared / len(b))


def jaccard(a: set[str], b: set[str]) -> float:
    """Return |A∩B| / |A∪B| (§4.2, the diff heuristic; 0 when both are empty)."""
    union = len(a | b)
    if union == 0:
        return 0.0
    return len(a & b) / union


# --- UTF-8 helpers (§3.3 byte limits, §3.4 excerpts, §8) -------------------------------------

_WHITESPACE_RUN = regex.compile(r"\p{White_Space}+")  # Go unicode.IsSpace / strings.Fields
_ELLIPSIS = "\u2026"


def byte_len(s: str) -> int:
    """Return the UTF-8 length of ``s`` in bytes (Go ``len(s)``; the 8000/100/200 limits)."""
    return len(s.encode("utf-8", "surrogatepass"))


def truncate_bytes(s: str, n: int) -> str:
    """Return the longest prefix of ``s`` of at most ``n`` UTF-8 bytes.

    Go slices bytes (``s[:n]``) and may cut a character in half; we drop the partial trailing
    character instead of emitting invalid UTF-8.
    """
    if n <= 0:
        return ""
    raw = s.encode("utf-8", "surrogatepass")
    if len(raw) <= n:
        return s
    return raw[:n].decode("utf-8", "ignore")


def excerpt(text: str, n: int) -> str:
    """Return the ``--brief`` excerpt of ``text`` limited to ``n`` code points (§3.4).

    Whitespace runs collapse to one space and the ends are trimmed; a longer text keeps its
    first n−1 code points, right-trimmed, followed by "…".
    """
    collapsed = _WHITESPACE_RUN.sub(" ", text).strip(" ")
    if len(collapsed) <= n:
        return collapsed
    return collapsed[: max(n - 1, 0)].rstrip(" ") + _ELLIPSIS
