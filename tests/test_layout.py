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
DOMAIN = ("text", "entities", "intent", "linking", "lifecycle", "diff", "recall", "related", "validate")
LEAVES = ("config", "errors", "records")
HEAVY = ("numpy", "numba", "kernels")

# Known departures, each with the reason it is tolerated; an entry that no longer applies fails
# the test below, so the list can only shrink.
APSW_OUTSIDE_STORE = {
    "mnemon/engine/bulk.py": "catches apsw.Error around explicit import edges (owner: import/export)",
    "mnemon/engine/scan.py": "apsw.Connection used in annotations only (owner: recall/search)",
}


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


def test_only_config_reads_the_environment() -> None:
    readers = []
    for path in modules("mnemon/**/*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb"):
                if isinstance(node.value, ast.Name) and node.value.id == "os":
                    readers.append(rel(path))
    assert sorted(set(readers)) == ["mnemon/config.py"]


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


LOCAL_MODEL_LIBS = ("onnxruntime", "tokenizers", "huggingface_hub")


def test_only_the_local_embedder_imports_the_model_runtime() -> None:
    users = {rel(p) for p in modules("mnemon/**/*.py") if hits(p, LOCAL_MODEL_LIBS)}
    assert users <= {"mnemon/embed/local.py"}


def test_server_protocols_never_load_the_model_runtime(tmp_path: Path) -> None:
    """remember and recall without MNEMON_EMBED_PROTOCOL=local import no onnxruntime/tokenizers."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMON_")}
    env["MNEMON_EMBED_ENDPOINT"] = "http://127.0.0.1:9"
    for args in (["remember", "the billing service uses Qdrant"], ["recall", "billing"]):
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "mnemon", "--data-dir", str(tmp_path), *args],
            capture_output=True, text=True, cwd=REPO, timeout=60, env=env,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        loaded = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
        assert "mnemon.store" in loaded  # the command really ran its engine
        assert sorted(m for m in loaded if m.split(".")[0] in LOCAL_MODEL_LIBS) == [], args
