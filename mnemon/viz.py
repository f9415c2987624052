"""Render the insight graph as Graphviz dot or as one self-contained HTML page (contract §3.17).

Labels are ``<8-char id>: [<category>] <content's first 60 bytes>...``, node colours by
category, edge labels by sub-type or edge type, edge colours by type. The HTML page fetches
nothing: instead of the Go program's vis-network from unpkg it carries a small force-directed
SVG drawing script written for this project. Memory content is untrusted text, so the graph
travels as JSON inside ``<script type="application/json">`` with ``<``, ``>`` and ``&`` escaped
(``</script>`` in content cannot close the element), the script only ever sets ``textContent``,
and a Content-Security-Policy admits the one inline script by its hash. stdlib only.
"""

from __future__ import annotations

import base64
import hashlib
import json

from mnemon.records import CATEGORIES, Edge, Insight

LABEL_BYTES = 60
CATEGORY_COLOURS = {
    "decision": "#e74c3c", "fact": "#3498db", "insight": "#9b59b6",
    "preference": "#2ecc71", "context": "#f39c12", "general": "#95a5a6",
}
EDGE_COLOURS = {
    "temporal": "#aaaaaa", "semantic": "#3498db", "causal": "#e74c3c", "entity": "#2ecc71",
    "supersedes": "#34495e",  # not in the Go palette; dark so that "replaced by" stands out
}
FORMATS = ("dot", "html")


def _cut(text: str, limit: int) -> str:
    """First ``limit`` UTF-8 bytes, never splitting a character, plus ``...`` when cut."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    return raw[:limit].decode("utf-8", "ignore") + "..."


def node_label(insight: Insight) -> str:
    return f"{insight.id[:8]}: [{insight.category}] {_cut(insight.content, LABEL_BYTES)}"


def edge_label(edge: Edge) -> str:
    return edge.metadata.get("sub_type") or edge.edge_type


def _dot_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\r", "").replace("\n", "\\n") + '"'


def to_dot(nodes: list[Insight], edges: list[Edge]) -> str:
    lines = [
        "digraph mnemon {",
        "  rankdir=LR;",
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
        '  edge [fontname="Helvetica", fontsize=8];',
    ]
    for n in nodes:
        colour = CATEGORY_COLOURS.get(n.category, CATEGORY_COLOURS["general"])
        lines.append(f"  {_dot_string(n.id)} [label={_dot_string(node_label(n))}, fillcolor=\"{colour}\"];")
    for e in edges:
        colour = EDGE_COLOURS.get(e.edge_type, "#aaaaaa")
        lines.append(
            f"  {_dot_string(e.source_id)} -> {_dot_string(e.target_id)} "
            f"[label={_dot_string(edge_label(e))}, color=\"{colour}\"];"
        )
    lines.append("}")
    return "\n".join(lines) + "\n"


def _script_json(value: object) -> str:
    """JSON safe inside a <script> element: no '<', '>' or '&' and no line separators survive raw."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    for raw, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                     ("\u2029", "\\u2029")):
        text = text.replace(raw, esc)
    return text


def _legend_rows(colours: dict[str, str], kind: str) -> str:
    return "".join(
        f'<li><span class="swatch {kind}" style="background:{colour}"></span>{name}</li>'
        for name, colour in colours.items()
    )


# The drawing script. Deterministic: initial positions on a spiral, fixed iteration count
# (scaled down for big graphs so the page stays responsive), no Math.random.
_SCRIPT = r"""
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var data = JSON.parse(document.getElementById("mnemon-graph").textContent);
  var svg = document.getElementById("canvas");
  var W = 1200, H = 800, n = data.nodes.length;
  var index = {}, pos = [], i, j, k;
  for (i = 0; i < n; i++) {
    index[data.nodes[i].id] = i;
    var a = i * 2.399963, r = 12 * Math.sqrt(i + 1);
    pos.push({x: W / 2 + r * Math.cos(a), y: H / 2 + r * Math.sin(a), dx: 0, dy: 0});
  }
  var links = [];
  for (k = 0; k < data.edges.length; k++) {
    var s = index[data.edges[k].source], t = index[data.edges[k].target];
    if (s !== undefined && t !== undefined && s !== t) links.push({s: s, t: t, e: data.edges[k]});
  }
  var ideal = Math.max(30, Math.sqrt(W * H / Math.max(n, 1)) * 0.6);
  var steps = Math.max(20, Math.min(300, Math.floor(4e7 / Math.max(n * n, 1))));
  for (var step = 0; step < steps; step++) {
    var temp = 40 * (1 - step / steps) + 1;
    for (i = 0; i < n; i++) { pos[i].dx = 0; pos[i].dy = 0; }
    for (i = 0; i < n; i++) {
      for (j = i + 1; j < n; j++) {
        var dx = pos[i].x - pos[j].x, dy = pos[i].y - pos[j].y;
        var d2 = dx * dx + dy * dy + 0.01, f = ideal * ideal / d2;
        pos[i].dx += dx * f; pos[i].dy += dy * f; pos[j].dx -= dx * f; pos[j].dy -= dy * f;
      }
    }
    for (k = 0; k < links.length; k++) {
      var p = pos[links[k].s], q = pos[links[k].t];
      var ex = p.x - q.x, ey = p.y - q.y, dist = Math.sqrt(ex * ex + ey * ey) + 0.01, g = dist / ideal;
      p.dx -= ex * g; p.dy -= ey * g; q.dx += ex * g; q.dy += ey * g;
    }
    for (i = 0; i < n; i++) {
      pos[i].dx += (W / 2 - pos[i].x) * 0.1; pos[i].dy += (H / 2 - pos[i].y) * 0.1;
      var len = Math.sqrt(pos[i].dx * pos[i].dx + pos[i].dy * pos[i].dy) + 1e-9, m = Math.min(len, temp);
      pos[i].x += pos[i].dx / len * m; pos[i].y += pos[i].dy / len * m;
    }
  }
  var minX = Infinity, minY = Infinity, maxX = -Infinity, maxY = -Infinity;
  for (i = 0; i < n; i++) {
    minX = Math.min(minX, pos[i].x); maxX = Math.max(maxX, pos[i].x);
    minY = Math.min(minY, pos[i].y); maxY = Math.max(maxY, pos[i].y);
  }
  if (n) svg.setAttribute("viewBox", (minX - 40) + " " + (minY - 40) + " " + (maxX - minX + 80) + " " + (maxY - minY + 80));
  function el(name, attrs, parent) {
    var node = document.createElementNS(NS, name);
    for (var key in attrs) node.setAttribute(key, attrs[key]);
    parent.appendChild(node);
    return node;
  }
  var edgeLayer = el("g", {"class": "edges"}, svg), nodeLayer = el("g", {"class": "nodes"}, svg);
  for (k = 0; k < links.length; k++) {
    var L = links[k], line = el("line", {x1: pos[L.s].x, y1: pos[L.s].y, x2: pos[L.t].x, y2: pos[L.t].y,
      stroke: L.e.color, "stroke-width": 1 + 2 * L.e.weight, "class": "edge " + L.e.type}, edgeLayer);
    el("title", {}, line).textContent = L.e.label + " (" + L.e.weight + ")";
  }
  var detail = document.getElementById("detail");
  function show(node) {
    detail.textContent = "";
    var head = document.createElement("h2");
    head.textContent = node.id + "  [" + node.category + ", importance " + node.importance + "]";
    var body = document.createElement("p");
    body.textContent = node.content;
    detail.appendChild(head); detail.appendChild(body);
  }
  for (i = 0; i < n; i++) {
    var node = data.nodes[i];
    var g = el("g", {"class": "node", transform: "translate(" + pos[i].x + "," + pos[i].y + ")"}, nodeLayer);
    el("circle", {r: 5 + 2 * node.importance, fill: node.color, "data-id": node.id}, g);
    el("title", {}, g).textContent = node.label;
    if (n <= 150) el("text", {x: 12, y: 4}, g).textContent = node.label;
    g.addEventListener("click", show.bind(null, node));
  }
  var done = document.getElementById("rendered");
  done.textContent = "drew " + n + " insights and " + links.length + " edges";
  document.body.setAttribute("data-rendered", String(n));
})();
"""

_STYLE = """
body{font-family:Helvetica,Arial,sans-serif;margin:0;display:flex;height:100vh;color:#222}
main{flex:1;position:relative}svg{width:100%;height:100%;background:#fcfcfc}
aside{width:300px;padding:12px;border-left:1px solid #ddd;overflow:auto;font-size:13px}
ul{list-style:none;padding:0;margin:4px 0 12px}li{margin:3px 0}
.swatch{display:inline-block;width:12px;height:12px;margin-right:6px;vertical-align:middle}
.swatch.node{border-radius:50%}.swatch.edge{height:3px}
.node{cursor:pointer}.node text{font-size:10px;fill:#333}h2{font-size:13px;word-break:break-all}
#detail p{white-space:pre-wrap}
"""


def to_html(nodes: list[Insight], edges: list[Edge]) -> str:
    graph = {
        "nodes": [
            {"id": n.id, "label": node_label(n), "content": n.content, "category": n.category,
             "importance": n.importance, "color": CATEGORY_COLOURS.get(n.category, CATEGORY_COLOURS["general"])}
            for n in nodes
        ],
        "edges": [
            {"source": e.source_id, "target": e.target_id, "type": e.edge_type, "label": edge_label(e),
             "weight": e.weight, "color": EDGE_COLOURS.get(e.edge_type, "#aaaaaa")}
            for e in edges
        ],
    }
    digest = base64.b64encode(hashlib.sha256(_SCRIPT.encode("utf-8")).digest()).decode("ascii")
    csp = f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; img-src data:"
    categories = {c: CATEGORY_COLOURS[c] for c in CATEGORIES}
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n'
        f"<title>mnemon memory graph</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
        '<main><svg id="canvas" xmlns="http://www.w3.org/2000/svg" role="img" '
        'aria-label="memory graph"></svg></main>\n'
        f'<aside><h1>mnemon</h1><p id="rendered">{len(nodes)} insights, {len(edges)} edges</p>'
        f"<h3>Categories</h3><ul>{_legend_rows(categories, 'node')}</ul>"
        f"<h3>Edges</h3><ul>{_legend_rows(EDGE_COLOURS, 'edge')}</ul>"
        '<div id="detail"><p>Click an insight to read it.</p></div></aside>\n'
        f'<script type="application/json" id="mnemon-graph">{_script_json(graph)}</script>\n'
        f"<script>{_SCRIPT}</script>\n</body>\n</html>\n"
    )


def render(nodes: list[Insight], edges: list[Edge], fmt: str) -> str:
    if fmt == "html":
        return to_html(nodes, edges)
    return to_dot(nodes, edges)
