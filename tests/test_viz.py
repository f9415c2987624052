"""`mnemon viz`: dot labels and colours, a self-contained HTML page, checked in headless chromium."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from mnemon.records import Edge, Insight
from mnemon.viz import CATEGORY_COLOURS, EDGE_COLOURS, to_dot, to_html

INJECTION = '</script><script>document.title="PWNED";document.body.setAttribute("data-pwned","1")</script>'


def test_dot_labels_colours_and_utf8_safe_truncation():
    long = "é" * 40  # 80 bytes: the 60-byte cut must not split a character
    nodes = [Insight(id="0123456789abcdef", content=long, category="decision"),
             Insight(id="fedcba9876543210", content='say "hi"\nnext', category="fact")]
    edges = [Edge("0123456789abcdef", "fedcba9876543210", "causal", 0.8, {"sub_type": "causes"}),
             Edge("fedcba9876543210", "0123456789abcdef", "temporal", 1.0, {})]
    dot = to_dot(nodes, edges)
    assert dot.startswith("digraph mnemon {\n") and dot.endswith("}\n")
    assert f'label="01234567: [decision] {"é" * 30}...", fillcolor="#e74c3c"' in dot
    assert 'label="fedcba98: [fact] say \\"hi\\"\\nnext", fillcolor="#3498db"' in dot
    assert '"0123456789abcdef" -> "fedcba9876543210" [label="causes", color="#e74c3c"]' in dot
    assert '"fedcba9876543210" -> "0123456789abcdef" [label="temporal", color="#aaaaaa"]' in dot


def test_cli_formats_output_file_and_errors(cli, tmp_path):
    a = cli.ok("remember", "Chose Qdrant because Rust performance is critical", "--cat", "decision")["id"]
    b = cli.ok("remember", "Qdrant runs in Docker on port 6333", "--cat", "fact")["id"]
    gone = cli.ok("remember", "A forgotten note about Qdrant", "--cat", "context")["id"]
    cli.ok("forget", gone)
    dot = cli("viz")
    assert dot.code == 0 and f'"{a}"' in dot.out and f'"{b}"' in dot.out and gone not in dot.out
    assert f'"{a}" -> "{b}"' in dot.out or f'"{b}" -> "{a}"' in dot.out
    out = tmp_path / "graph.html"
    res = cli("viz", "--format", "html", "-o", str(out))
    assert res.code == 0 and res.out == "" and res.err == f"written to {out}\n"
    assert "<svg" in out.read_text() and gone not in out.read_text()
    bad = cli("viz", "--format", "svg")
    assert bad.code == 1 and bad.err == "Error: unsupported format: svg (use dot or html)\n"
    # a NUL in the path (in-process only: no real argv holds one) raised ValueError, a traceback
    nul = cli("viz", "-o", "graph\x00.dot")
    assert nul.code == 1 and nul.err == "Error: write graph\x00.dot: embedded null byte\n"


def _page(tmp_path: Path) -> tuple[Path, str]:
    nodes = [Insight(id=f"id-{i:04d}-xxxx", content=f"insight number {i} about Qdrant", category=cat)
             for i, cat in enumerate(CATEGORY_COLOURS)]
    nodes.append(Insight(id="evil-0000-xxxx", content=INJECTION + " & <b>bold</b> \u2028", category="fact"))
    edges = [Edge(nodes[i].id, nodes[i + 1].id, t, 0.5, {}) for i, t in enumerate(EDGE_COLOURS)]
    html = to_html(nodes, edges)
    path = tmp_path / "graph.html"
    path.write_text(html, encoding="utf-8")
    return path, html


def test_html_is_self_contained_escaped_and_has_a_legend(tmp_path):
    _, html = _page(tmp_path)
    assert not re.search(r"(src|href)\s*=|https?://(?!www\.w3\.org)|@import|fetch\(|XMLHttpRequest", html)
    block = re.search(r'<script type="application/json" id="mnemon-graph">(.*?)</script>', html, re.S).group(1)
    assert "<" not in block and ">" not in block and "&" not in block
    data = json.loads(block)
    assert data["nodes"][-1]["content"].startswith(INJECTION)  # escaped, not altered
    assert html.count("<script") == 2  # the data block and our drawing script, nothing injected
    for name, colour in {**CATEGORY_COLOURS, **EDGE_COLOURS}.items():
        assert f'style="background:{colour}"></span>{name}</li>' in html
    assert "Content-Security-Policy" in html and "innerHTML" not in html


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(_chromium() is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_page_draws_in_headless_chromium_and_injected_script_does_not_run(tmp_path):
    path, _ = _page(tmp_path)
    flags = [
        _chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000", "--window-size=1200,800",
    ]
    dom = subprocess.run([*flags, "--dump-dom", path.as_uri()], capture_output=True, text=True, timeout=120).stdout
    assert 'data-rendered="7"' in dom, dom[:500]
    assert "drew 7 insights and 5 edges" in dom
    assert dom.count("<circle") == 7 and dom.count('<line') == 5
    assert "<title>mnemon memory graph</title>" in dom  # the injected script would have renamed the page
    assert 'data-pwned="1"' not in dom
    shot = tmp_path / "viz.png"
    subprocess.run([*flags, f"--screenshot={shot}", path.as_uri()], capture_output=True, timeout=120)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 5000
    print(f"screenshot: {shot}")
