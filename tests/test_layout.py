"""Import-direction rules of architecture §3, checked with an AST walk, and the start-up rule:
``--help``, ``--version`` and ``store list`` import neither numpy nor numba (targets: at most
100 ms, basic-memory issue #886).

Imports under ``if TYPE_CHECKING:`` never run and are ignored; imports inside functions count
(they run when the function does), except where a rule is explicitly about module level.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO

MNEMON = REPO / "mnemon"
DOMAIN = ("text", "entities", "intent", "linking", "lifecycle", "diff", "recall", "related", "relevance", "feedback",
          "validate")
LEAVES = ("config", "errors", "records", "heap")
HEAVY = ("numpy", "numba", "kernels")

# Known departures, each with the reason it is tolerated; an entry that no longer applies fails
# the test below, so the list can only shrink.
APSW_OUTSIDE_STORE: dict[str, str] = {}


@dataclass(frozen=True)
class Imp:
    module: str
    top_level: bool


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            hidden.update(id(sub) for sub in ast.walk(node))
    return hidden


def imports_of(path: Path) -> list[Imp]:
    """Absolute module names imported by ``path`` (relative imports resolved within mnemon)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    hidden = _type_checking_nodes(tree)
    top = {id(n) for n in tree.body}
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    out = []
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        if isinstance(node, ast.Import):
            out += [Imp(alias.name, id(node) in top) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base]) if base else ".".join(parent)
            out.append(Imp(base, id(node) in top))
            # ``from mnemon import store`` imports the submodule mnemon.store
            out += [Imp(f"{base}.{alias.name}", id(node) in top) for alias in node.names]
    return out


def modules(pattern: str) -> list[Path]:
    return sorted(p for p in REPO.glob(pattern) if "__pycache__" not in p.parts)


def rel(path: Path) -> str:
    return str(path.relative_to(REPO))


def hits(path: Path, banned: tuple[str, ...], *, top_level_only: bool = False) -> list[str]:
    found = []
    for imp in imports_of(path):
        if top_level_only and not imp.top_level:
            continue
        if any(imp.module == b or imp.module.startswith(b + ".") for b in banned):
            found.append(imp.module)
    return sorted(set(found))


def test_kernels_import_only_numeric_code() -> None:
    banned = ("mnemon", "apsw", "httpx", "typer", "regex", "logging", "os", "pathlib", "io", "json", "sqlite3")
    bad = {rel(p): hits(p, banned) for p in modules("kernels/*.py")}
    assert {k: v for k, v in bad.items() if v} == {}


def test_domain_modules_stay_pure() -> None:
    banned = ("mnemon.store", "mnemon.embed", "mnemon.cli", "mnemon.engine", "apsw", "httpx", "typer",
              "os", "socket", "sqlite3")
    bad = {name: hits(MNEMON / f"{name}.py", banned) for name in DOMAIN}
    assert {k: v for k, v in bad.items() if v} == {}


def test_leaf_modules_use_the_stdlib_only() -> None:
    banned = ("numpy", "numba", "kernels", "apsw", "httpx", "typer", "regex", "mnemon.store", "mnemon.engine",
              "mnemon.cli", "mnemon.embed")
    bad = {name: hits(MNEMON / f"{name}.py", banned) for name in LEAVES}
    assert {k: v for k, v in bad.items() if v} == {}


def test_store_never_imports_domain_embed_kernels_or_cli() -> None:
    banned = ("kernels", "httpx", "typer", "mnemon.embed", "mnemon.cli", "mnemon.engine",
              *(f"mnemon.{d}" for d in DOMAIN if d != "validate"))
    bad = {rel(p): hits(p, banned) for p in modules("mnemon/store/*.py")}
    assert {k: v for k, v in bad.items() if v} == {}


def test_embed_never_imports_store_or_kernels() -> None:
    banned = ("mnemon.store", "kernels", "apsw", "typer", "mnemon.cli", "mnemon.engine")
    bad = {rel(p): hits(p, banned) for p in modules("mnemon/embed/*.py")}
    assert {k: v for k, v in bad.items() if v} == {}


def test_only_store_imports_apsw_and_only_embed_imports_httpx() -> None:
    outside = [p for p in modules("mnemon/**/*.py") if "store" not in p.relative_to(MNEMON).parts]
    apsw_users = {rel(p) for p in outside if hits(p, ("apsw",))}
    assert apsw_users == set(APSW_OUTSIDE_STORE), "update APSW_OUTSIDE_STORE only to remove entries"
    httpx_users = {rel(p) for p in modules("mnemon/**/*.py") if hits(p, ("httpx",))}
    assert httpx_users <= {rel(p) for p in modules("mnemon/embed/*.py")}


def test_cli_imports_the_engine_lazily_and_no_heavy_module_at_all() -> None:
    for path in modules("mnemon/cli/*.py"):
        assert hits(path, ("mnemon.engine", "mnemon.store", *HEAVY), top_level_only=True) == [], rel(path)
        assert hits(path, ("apsw", "httpx", "kernels", "numba")) == [], rel(path)


# Besides config: the client forwards the whole environment to the server without importing config
# (re, json, pathlib: milliseconds per call), and the worker replaces its environment by the client's.
ENVIRONMENT_OUTSIDE_CONFIG = {"mnemon/client.py", "mnemon/server/worker.py"}


def test_only_config_reads_the_environment() -> None:
    readers = []
    for path in modules("mnemon/**/*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb"):
                if isinstance(node.value, ast.Name) and node.value.id == "os":
                    readers.append(rel(path))
    assert sorted(set(readers)) == sorted({"mnemon/config.py", *ENVIRONMENT_OUTSIDE_CONFIG})


def test_kernels_package_is_this_repository() -> None:
    import kernels

    assert Path(kernels.__file__).resolve().is_relative_to(REPO)


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["store", "list"], ["remember", "--help"]])
def test_fast_commands_import_neither_numpy_nor_numba(args: list[str], tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "mnemon", "--data-dir", str(tmp_path), *args],
        capture_output=True, text=True, cwd=REPO, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    loaded = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert loaded, "no -X importtime output"
    heavy = sorted(m for m in loaded if m.split(".")[0] in ("numpy", "numba", "kernels", "httpx"))
    assert heavy == []


def _module_of(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_import_circle() -> None:
    """No module reaches itself through imports, lazy ones included (issue 10 removed the last one,
    cli -> cli.agent -> mcp -> cli). ``from pkg import sub`` is an edge to the submodule only, and a
    submodule's import of its own package (``from mnemon.embed import EmbedError`` in embed.ollama:
    names the package's ``__init__`` defines before it imports its submodules) is not counted."""
    paths = {_module_of(p): p for p in [*modules("mnemon/**/*.py"), *modules("kernels/*.py")]}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        edges = set()
        for imp in imports_of(path):
            if imp.module in paths and not name.startswith(imp.module + "."):
                edges.add(imp.module)
        # drop "pkg" when "pkg.sub" is also imported by the same from-import
        graph[name] = {e for e in edges if not any(o.startswith(e + ".") for o in edges)} - {name}
    state: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                circles.append([*stack[stack.index(nxt):], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert circles == [], circles


def test_client_imports_only_the_standard_library_and_its_protocol() -> None:
    """The console script's module: no typer, numpy, apsw or mnemon.cli at all (issue 10)."""
    allowed = {"mnemon.server.paths", "mnemon.server.protocol", "mnemon.server.fingerprint", "mnemon.server",
               "mnemon.server.fingerprint.fingerprint", "mnemon.server.fingerprint.identity", "mnemon.server.control", "mnemon.cli",
               "mnemon.cli.main", "mnemon", "mnemon.__version__"}
    for path in (MNEMON / "client.py", *[MNEMON / "server" / f"{m}.py" for m in ("paths", "protocol", "fingerprint")]):
        found = {i.module for i in imports_of(path) if i.module.split(".")[0] in ("mnemon", "kernels")}
        assert found <= allowed, rel(path)
        assert hits(path, ("typer", "numpy", "numba", "apsw", "httpx", "json", "pathlib", "dataclasses")) == []
    lazy_only = {i.module for i in imports_of(MNEMON / "client.py") if not i.top_level}
    assert {"mnemon.cli", "mnemon.server.control"} <= lazy_only  # the fallback path only


def test_served_help_imports_no_framework(tmp_path: Path) -> None:
    """Through a server, ``mnemon --help`` imports the client and its protocol, nothing of the CLI."""
    env = {**os.environ, "MNEMON_SERVER": "require", "XDG_RUNTIME_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    tmp_path.chmod(0o700)
    try:
        proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "mnemon", "--help"], env=env,
                              capture_output=True, text=True, cwd=REPO, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert proc.stdout.startswith("Usage: mnemon")
        # the first call started the server; the second is served from the start
        proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "mnemon", "--help"], env=env,
                              capture_output=True, text=True, cwd=REPO, timeout=60)
        assert proc.returncode == 0 and proc.stdout.startswith("Usage: mnemon")
        loaded = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()
                  if line.startswith("import time:")}
        assert "mnemon.client" in loaded
        assert sorted(m for m in loaded if m.split(".")[0] in ("typer", "numpy", "numba", "apsw", "httpx", "json")
                      or m == "mnemon.cli" or m.startswith("mnemon.cli.")) == []
    finally:
        subprocess.run([sys.executable, "-m", "mnemon", "server", "stop"], env=env, capture_output=True, timeout=60)


LOCAL_MODEL_LIBS = ("onnxruntime", "tokenizers", "huggingface_hub")


def test_only_the_local_embedder_imports_the_model_runtime() -> None:
    users = {rel(p) for p in modules("mnemon/**/*.py") if hits(p, LOCAL_MODEL_LIBS)}
    assert users <= {"mnemon/embed/local.py"}


def test_server_protocols_never_load_the_model_runtime(tmp_path: Path) -> None:
    """remember and recall without MNEMON_EMBED_PROTOCOL=local import no onnxruntime/tokenizers."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMON_")}
    env["MNEMON_EMBED_ENDPOINT"] = "http://127.0.0.1:9"
    env["MNEMON_SERVER"] = "off"  # in-process, so -X importtime sees what the command itself loads
    for args in (["remember", "the billing service uses Qdrant"], ["recall", "billing"]):
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "mnemon", "--data-dir", str(tmp_path), *args],
            capture_output=True, text=True, cwd=REPO, timeout=60, env=env,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        loaded = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
        assert "mnemon.store" in loaded  # the command really ran its engine
        assert sorted(m for m in loaded if m.split(".")[0] in LOCAL_MODEL_LIBS) == [], args


def test_status_imports_only_the_read_pipeline(tmp_path: Path) -> None:
    """``status`` (the session-start hook's command) opens the read pipeline alone: no numpy, no
    import/retrieval/graph pipeline modules (about 40 ms of a 150 ms process)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMON_")}
    env["MNEMON_SERVER"] = "off"
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "mnemon", "--data-dir", str(tmp_path), "status"],
                          capture_output=True, text=True, cwd=REPO, timeout=60, env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert '"total_insights": 0' in proc.stdout
    loaded = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "mnemon.engine.read" in loaded and "mnemon.store" in loaded
    heavy = ("numpy", "numba", "kernels", "httpx")
    pipelines = {"mnemon.engine.composed", "mnemon.engine.bulk", "mnemon.engine.retrieve", "mnemon.engine.write",
                 "mnemon.engine.graph", "mnemon.engine.hot"}  # fmt: skip
    assert sorted(m for m in loaded if m.split(".")[0] in heavy or m in pipelines) == []
