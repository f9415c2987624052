"""Seeded synthetic large-store generator: an import draft (contract §3.15) of realistic memories.

Owns the benchmark corpus. ``generate_draft(n, seed=..., edges_per_insight=...)`` returns a
``schema_version "1"`` draft whose insights look like what agents store: technical decisions,
facts, preferences, conversation turns and incident notes, from several sources, naming entities
from the tech dictionary (§4.3), CamelCase identifiers and file paths, with timestamps spread over
months and a mix of importances. Every content is unique (it carries a ticket/PR reference), so an
import stores exactly ``n`` insights.

Explicit edges top the store up to about ``edges_per_insight`` edge rows per insight: the generator
estimates the rows the import's graph engine will add on its own (entity edges, §4.5: up to 5
newest co-mentioning insights per entity, both directions; backbone repair, §4.4: two rows per
adjacent pair of one source) and adds one-direction explicit edges for the rest, mostly between
near neighbours in time, as linked notes are. ``draft_vectors`` gives deterministic 768-dim float64
vectors of the contents (the HashEmbedder's, so they equal what ``tests/embed_server.py`` serves).

``lang="zh"`` (``--lang zh``) writes the same kinds of memories in Chinese, as a Chinese-speaking user's
agent stores them (the entities, identifiers and paths stay as written): the corpus for recall on
large Chinese stores, where a Han character is a term of its own and a long turn gets pseudo-relevance
feedback (bench/README.md).

Deterministic: the same ``(n, seed, edges_per_insight, lang)`` gives byte-identical output on every
machine (stdlib ``random.Random``, no hash randomisation). Script use:

    python bench/generate.py --n 10000 --out drafts.json [--edges-per-insight 35] [--seed 1]
        [--lang en|zh] [--vectors vectors.npy]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict, deque
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

__all__ = ["generate_draft", "draft_vectors", "write_draft", "main"]

DEFAULT_EDGES_PER_INSIGHT = 35
DEFAULT_SEED = 1
TIMELINE_DAYS = 240  # about eight months of history
TIMELINE_END = datetime(2026, 9, 1, tzinfo=timezone.utc)
_ENTITY_NEIGHBOURS = 5  # §4.5: newest co-mentioning insights linked per entity
_ENTITY_CAP = 50  # §4.5: counted inserts per insight

SOURCES = ("user", "claude-code", "codex", "slack", "meeting-notes", "cursor")
SOURCE_WEIGHTS = (30, 25, 15, 12, 10, 8)
IMPORTANCE_WEIGHTS = ((1, 8), (2, 17), (3, 45), (4, 20), (5, 10))

TECH = (
    "Go Rust Python Java Kotlin Swift Ruby Elixir Zig Lua Dart Scala Haskell Julia JavaScript "
    "TypeScript React Vue Angular Svelte Node Deno Bun Vite Webpack SQLite PostgreSQL MySQL Redis "
    "MongoDB DynamoDB Cassandra Qdrant Milvus Chroma Pinecone Neo4j Weaviate Elasticsearch Docker "
    "Kubernetes Terraform Ansible Nginx Caddy Kafka RabbitMQ AWS GCP Azure Vercel Netlify Cloudflare "
    "Supabase Firebase Ollama OpenAI Claude PyTorch TensorFlow LangChain LlamaIndex FAISS GitHub "
    "GitLab FastAPI Flask Django Rails Spring Express Gin Pytest Jest Vitest gRPC GraphQL WebSocket "
    "OAuth JWT YAML TOML Protobuf MCP"
).split()

_HUMP_A = "Payment Order User Session Billing Search Index Cache Auth Token Event Report Invoice Queue Media".split()
_HUMP_B = "Service Gateway Manager Handler Worker Store Client Router Builder Scheduler Resolver Pipeline".split()
CAMEL = tuple(a + b for a in _HUMP_A for b in _HUMP_B)

_DIRS = "src lib cmd internal pkg app services api web scripts".split()
_MODULES = "billing auth search ingest export sync cache queue reports users notify storage".split()
_FILES = "handler client server models config worker schema router utils main index store".split()
_EXTS = ("py", "go", "rs", "ts", "tsx", "sql", "yaml", "toml", "js", "md")

@dataclass(frozen=True)
class Words:
    """One language's words for the corpus: the vocabularies and each kind's sentence templates
    (``str.format`` fields, every one drawn before the template is picked, in a fixed order, so a
    language's output depends on the seed alone), the prefix of a lesson (category ``insight``) and
    the unique reference each memory ends with."""

    people: tuple[str, ...]
    components: tuple[str, ...]
    reasons: tuple[str, ...]
    prefs: tuple[str, ...]
    outcomes: tuple[str, ...]
    weekdays: tuple[str, ...]
    decision: tuple[str, ...]  # {a} {b} {comp} {reason} {outcome} {reason2} {camel}
    fact: tuple[str, ...]  # {a} {camel} {path} {comp} {replicas} {retries} {pool} {comp2}
    preference: tuple[str, ...]  # {person} {a} {pref} {pref2} {pref3}
    turn: tuple[str, ...]  # {speaker} {other} {a} {camel} {comp} {weekday} {outcome}
    incident: tuple[str, ...]  # {a} {camel} {path} {comp} {outcome} {comp2}
    lesson: str
    refs: tuple[str, ...]
    reference: str  # {ref} {number}


ENGLISH = Words(
    people=tuple("Alice Bob Carol Dave Erin Frank Grace Heidi Ivan Judy Mallory Niaj Olivia Peggy Rupert Sybil".split()),
    components=(
        "billing service", "search index", "auth flow", "ingest pipeline", "nightly export", "mobile app",
        "admin dashboard", "notification worker", "rate limiter", "feature flags", "CI pipeline",
        "staging cluster", "onboarding flow", "public API", "data warehouse", "audit log",
    ),
    reasons=(
        "the write throughput is critical", "the team already knows it", "latency spikes hurt checkout",
        "operational cost must stay low", "it keeps the deployment simple", "the old setup kept timing out",
        "we need strong consistency", "the licence is permissive", "memory usage doubled last quarter",
        "the vendor lock-in worried legal", "cold starts were too slow", "it scales horizontally",
    ),
    prefs=(
        "tabs over spaces", "small focused pull requests", "explicit error messages", "dark mode in every tool",
        "short standups", "typed configuration", "squash merges", "integration tests over mocks",
        "async code reviews", "plain SQL over ORMs", "early morning deploys", "structured logging",
    ),
    outcomes=(
        "p99 latency dropped by half", "the flaky test disappeared", "the queue backlog cleared overnight",
        "memory usage went back to normal", "error rates fell below one percent", "the build got twice as fast",
        "customers stopped reporting timeouts", "the migration finished without downtime",
    ),
    weekdays=("Monday", "Tuesday", "Wednesday", "Thursday", "Friday"),
    decision=(
        "Chose {a} over {b} for the {comp} because {reason}.",
        "Decided to migrate the {comp} from {b} to {a} so that {outcome}.",
        "We will keep {a} in the {comp}; switching to {b} was rejected due to {reason2}.",
        "Architecture decision: {camel} talks to {a} directly, in order to avoid the {b} hop.",
    ),
    fact=(
        "The {comp} runs on {a} with {replicas} replicas in production.",
        "{camel} is defined in {path} and retries {retries} times before giving up.",
        "Config for {a} lives in {path}; the connection pool size is {pool}.",
        "{camel} reads from {a} and writes audit rows through the {comp2}.",
    ),
    preference=(
        "{person} prefers {pref} when working on {a} code.",
        "User prefers {pref2}; never suggest {a} boilerplate without asking.",
        "{person} likes {a} for prototypes but wants {pref3} in production.",
    ),
    turn=(
        "{speaker}: can we move the {comp} to {a} next sprint? {other} says {camel} is the blocker.",
        "{speaker} asked {other} on {weekday} why {camel} still depends on {a}.",
        "{speaker}: the {a} upgrade broke {camel} again, {other} is rolling it back.",
        "{other} told {speaker} that {outcome} after the {a} change.",
    ),
    incident=(
        "Outage in the {comp} was caused by {camel} exhausting {a} connections; fix in {path}.",
        "Fixed a race in {path} because {camel} read stale {a} state; as a result {outcome}.",
        "Lesson: always set timeouts on {a} calls in {camel}, otherwise the {comp2} hangs.",
    ),
    lesson="Lesson",
    refs=("ticket", "issue", "ref", "change"),
    reference=" ({ref} {number})",
)  # fmt: skip

# The Chinese corpus: the same kinds, in the words a Chinese team writes its notes in.
CHINESE = Words(
    people=tuple("小王 老李 张伟 王芳 刘洋 陈静 杨磊 赵敏 黄立 周毅 吴倩 孙浩 马哥 老陈 雯雯 大磊".split()),
    components=(
        "计费服务", "搜索索引", "登录流程", "数据接入管道", "夜间导出任务", "移动端应用", "管理后台", "通知服务",
        "限流器", "功能开关", "持续集成流水线", "预发集群", "新用户引导", "开放接口", "数据仓库", "审计日志",
    ),
    reasons=(
        "写入吞吐是关键", "团队已经熟悉它", "延迟抖动影响下单", "运维成本必须压低", "部署更简单", "旧方案总是超时",
        "我们需要强一致性", "许可证更宽松", "上个季度内存翻了一倍", "法务担心被厂商绑定", "冷启动太慢", "它能水平扩展",
    ),
    prefs=(
        "缩进用空格", "小而专注的合并请求", "明确的错误信息", "所有工具都用深色模式", "站会要短", "配置要有类型",
        "合并时压缩提交", "集成测试优先于模拟", "异步代码评审", "直接写 SQL 不用 ORM", "早上发布", "结构化日志",
    ),
    outcomes=(
        "p99 延迟降了一半", "那个不稳定的测试不再失败", "队列积压一夜清空", "内存占用恢复正常",
        "错误率降到百分之一以下", "构建快了一倍", "客户不再反馈超时", "迁移完成且没有停机",
    ),
    weekdays=("周一", "周二", "周三", "周四", "周五"),
    decision=(
        "{comp}选了 {a} 而不是 {b}，因为{reason}。",
        "决定把{comp}从 {b} 迁到 {a}，这样{outcome}。",
        "{comp}继续用 {a}；换成 {b} 的方案被否了，原因是{reason2}。",
        "架构决定：{camel} 直接连 {a}，省掉 {b} 这一跳。",
    ),
    fact=(
        "{comp}在生产环境跑在 {a} 上，共 {replicas} 个副本。",
        "{camel} 定义在 {path}，放弃之前会重试 {retries} 次。",
        "{a} 的配置在 {path}；连接池大小是 {pool}。",
        "{camel} 从 {a} 读数据，通过{comp2}写审计记录。",
    ),
    preference=(
        "{person}写 {a} 代码时喜欢{pref}。",
        "用户偏好{pref2}；没问过之前不要给 {a} 的样板代码。",
        "{person}做原型喜欢用 {a}，但生产环境要求{pref3}。",
    ),
    turn=(
        "{speaker}：下个迭代能把{comp}迁到 {a} 吗？{other}说卡在 {camel}。",
        "{speaker}{weekday}问{other}，为什么 {camel} 还依赖 {a}。",
        "{speaker}：{a} 升级又把 {camel} 搞挂了，{other}正在回滚。",
        "{other}告诉{speaker}，{a} 改完之后{outcome}。",
    ),
    incident=(
        "{comp}故障是因为 {camel} 耗尽了 {a} 连接；修复在 {path}。",
        "修复了 {path} 里的竞态：{camel} 读到了过期的 {a} 状态，结果{outcome}。",
        "教训：在 {camel} 里调用 {a} 一定要设超时，否则{comp2}会卡住。",
    ),
    lesson="教训",
    refs=("工单", "需求", "记录", "变更"),
    reference="（{ref} {number}）",
)  # fmt: skip

_LANGS = {"en": ENGLISH, "zh": CHINESE}


def _path(rng: random.Random) -> str:
    return f"{rng.choice(_DIRS)}/{rng.choice(_MODULES)}/{rng.choice(_FILES)}.{rng.choice(_EXTS)}"


# Each kind draws its fields in one fixed order, then picks a template: the English corpus's draws
# are the ones its figures were measured on (tests/test_bench_generate.py pins them).
def _decision(rng: random.Random, w: Words) -> tuple[str, str, list[str]]:
    a, b = rng.sample(TECH, 2)
    comp = rng.choice(w.components)
    reason, outcome, reason2 = rng.choice(w.reasons), rng.choice(w.outcomes), rng.choice(w.reasons)
    fields = {"a": a, "b": b, "comp": comp, "reason": reason, "outcome": outcome, "reason2": reason2}
    camel = rng.choice(CAMEL)
    text = rng.choice(w.decision).format(**fields, camel=camel)
    return "decision", text, [a, b]


def _fact(rng: random.Random, w: Words) -> tuple[str, str, list[str]]:
    a, camel, path = rng.choice(TECH), rng.choice(CAMEL), _path(rng)
    comp, replicas, retries = rng.choice(w.components), rng.randint(2, 64), rng.randint(2, 9)
    pool, comp2 = rng.randint(4, 256), rng.choice(w.components)
    fields = {"a": a, "camel": camel, "path": path, "comp": comp, "replicas": replicas, "retries": retries}
    text = rng.choice(w.fact).format(**fields, pool=pool, comp2=comp2)
    return "fact", text, [e for e in (a, camel, path) if e in text]


def _preference(rng: random.Random, w: Words) -> tuple[str, str, list[str]]:
    person, a = rng.choice(w.people), rng.choice(TECH)
    pref, pref2, pref3 = rng.choice(w.prefs), rng.choice(w.prefs), rng.choice(w.prefs)
    text = rng.choice(w.preference).format(person=person, a=a, pref=pref, pref2=pref2, pref3=pref3)
    return "preference", text, [a]


def _turn(rng: random.Random, w: Words) -> tuple[str, str, list[str]]:
    speaker, other = rng.sample(w.people, 2)
    a, camel = rng.choice(TECH), rng.choice(CAMEL)
    comp, weekday, outcome = rng.choice(w.components), rng.choice(w.weekdays), rng.choice(w.outcomes)
    fields = {"speaker": speaker, "other": other, "a": a, "camel": camel, "comp": comp, "weekday": weekday}
    text = rng.choice(w.turn).format(**fields, outcome=outcome)
    return "context", text, [a, camel]


def _incident(rng: random.Random, w: Words) -> tuple[str, str, list[str]]:
    a, camel, path = rng.choice(TECH), rng.choice(CAMEL), _path(rng)
    comp, outcome, comp2 = rng.choice(w.components), rng.choice(w.outcomes), rng.choice(w.components)
    text = rng.choice(w.incident).format(a=a, camel=camel, path=path, comp=comp, outcome=outcome, comp2=comp2)
    category = "insight" if text.startswith(w.lesson) else "fact"
    return category, text, [a, camel] + ([path] if path in text else [])


_KINDS = ((_decision, 25), (_fact, 30), (_preference, 10), (_turn, 25), (_incident, 10))


def _timestamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def generate_draft(
    n: int,
    *,
    seed: int = DEFAULT_SEED,
    edges_per_insight: float = DEFAULT_EDGES_PER_INSIGHT,
    end: datetime = TIMELINE_END,
    lang: str = "en",
) -> dict[str, Any]:
    """Return an import draft of ``n`` unique insights plus explicit edges (see module docstring)."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    if lang not in _LANGS:
        raise ValueError(f"lang must be one of {', '.join(_LANGS)}, got {lang!r}")
    rng = random.Random(seed)
    words = _LANGS[lang]
    kinds = [k for k, _ in _KINDS]
    kind_weights = [w for _, w in _KINDS]
    imps = [i for i, _ in IMPORTANCE_WEIGHTS]
    imp_weights = [w for _, w in IMPORTANCE_WEIGHTS]
    start = end - timedelta(days=TIMELINE_DAYS)
    step = TIMELINE_DAYS * 86400 / n
    insights: list[dict[str, Any]] = []
    for index in range(n):
        category, text, entities = rng.choices(kinds, kind_weights)[0](rng, words)
        # A ticket or PR reference makes every content unique, as real notes usually are.
        content = text + words.reference.format(ref=rng.choice(words.refs), number=index + 1000)
        moment = start + timedelta(seconds=index * step + rng.uniform(0, step))
        item: dict[str, Any] = {
            "content": content,
            "category": category,
            "importance": rng.choices(imps, imp_weights)[0],
            "tags": rng.sample(("backend", "frontend", "infra", "team", "perf", "security", "data"), rng.randint(0, 3)),
            "entities": list(dict.fromkeys(e for e in entities if e in text)),
            "source": rng.choices(SOURCES, SOURCE_WEIGHTS)[0],
            "created_at": _timestamp(moment),
        }
        insights.append(item)
    auto_rows = _estimated_auto_rows(insights)
    wanted = max(0, round(edges_per_insight * n) - auto_rows)
    edges = _explicit_edges(rng, n, wanted)
    return {"schema_version": "1", "source": "import", "insights": insights, "edges": edges}


def _import_path() -> None:
    root = Path(__file__).resolve().parent.parent
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))


def _estimated_auto_rows(insights: list[dict[str, Any]]) -> int:
    """Estimate the edge rows the import itself adds: entity edges (§4.5) and backbones (§4.4)."""
    _import_path()
    from mnemon.entities import extract_entities

    recent: dict[str, deque[int]] = defaultdict(lambda: deque(maxlen=_ENTITY_NEIGHBOURS))
    pairs: set[tuple[int, int]] = set()
    for index, item in enumerate(insights):
        counted = 0
        # Import resolves entities in merge mode: the provided ones, then what extraction finds.
        resolved = dict.fromkeys([*item["entities"], *extract_entities(item["content"])])
        for entity in resolved:
            for other in reversed(recent[entity]):
                if counted >= _ENTITY_CAP:
                    break
                pairs.add((other, index))
                counted += 2
            recent[entity].append(index)
    per_source: dict[str, int] = defaultdict(int)
    for item in insights:
        per_source[item["source"]] += 1
    backbone = sum(2 * (count - 1) for count in per_source.values() if count > 1)
    return 2 * len(pairs) + backbone


def _explicit_edges(rng: random.Random, n: int, wanted: int) -> list[dict[str, Any]]:
    """Return ``wanted`` distinct one-direction explicit edges, mostly between near neighbours."""
    if n < 2:
        return []
    wanted = min(wanted, n * (n - 1))
    types = ("semantic", "causal", "entity", "temporal", "supersedes")
    type_weights = (45, 25, 15, 10, 5)
    seen: set[tuple[int, int, str]] = set()
    edges: list[dict[str, Any]] = []
    while len(edges) < wanted:
        src = rng.randrange(n)
        # Linked notes are usually close in time; a fifth of links reach anywhere.
        dst = rng.randrange(n) if rng.random() < 0.2 else min(n - 1, max(0, src + rng.randint(-200, 200)))
        edge_type = rng.choices(types, type_weights)[0]
        if dst == src or (src, dst, edge_type) in seen:
            continue
        seen.add((src, dst, edge_type))
        edge: dict[str, Any] = {
            "source_index": src,
            "target_index": dst,
            "edge_type": edge_type,
            "weight": round(rng.uniform(0.3, 1.0), 2),
        }
        if rng.random() < 0.3:
            edge["reason"] = rng.choice(("follow-up", "same incident", "related decision", "see also"))
        edges.append(edge)
    return edges


def draft_vectors(draft: dict[str, Any], dim: int = 768) -> Any:
    """Return the float64 (n, dim) HashEmbedder vectors of the draft's contents (imports numpy)."""
    _import_path()
    from mnemon.embed.fake import HashEmbedder

    return HashEmbedder(dim=dim).embed_batch([item["content"] for item in draft["insights"]])


def write_draft(draft: dict[str, Any], out: Path) -> None:
    """Write the draft as compact UTF-8 JSON."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(draft, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, required=True, help="number of insights")
    parser.add_argument("--out", type=Path, required=True, help="draft file to write")
    parser.add_argument("--edges-per-insight", type=float, default=DEFAULT_EDGES_PER_INSIGHT)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--vectors", type=Path, help="also write the contents' 768-dim vectors (.npy)")
    parser.add_argument("--dim", type=int, default=768, help="vector dimension for --vectors")
    parser.add_argument("--lang", choices=tuple(_LANGS), default="en", help="the memories' language")
    args = parser.parse_args(argv)
    draft = generate_draft(args.n, seed=args.seed, edges_per_insight=args.edges_per_insight, lang=args.lang)
    write_draft(draft, args.out)
    if args.vectors is not None:
        import numpy as np

        np.save(args.vectors, draft_vectors(draft, args.dim))
    print(f"wrote {args.n} insights and {len(draft['edges'])} explicit edges to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
