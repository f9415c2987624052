"""Plot ``bench/scale.py`` results: whole-process medians per command, warm and cold, per store.

    python bench/plot_scale.py --out bench/scale.png r100k.json:"100k" r1m.json:"1M" r1m-vec.json:"1M + vectors"

Needs the ``bench`` extra (matplotlib). One group of bars per command, one bar pair (warm, cold)
per store, with the targets of issue 13 drawn as short lines.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

COMMANDS = ("status", "recall", "search", "remember")
TARGETS_MS = {"status": 150, "remember": 300}  # recall: 600 without vectors, 1000 with (per store)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="plot bench/scale.py results")
    parser.add_argument("results", nargs="+", help="result.json:label")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = []
    for spec in args.results:
        path, _, label = spec.partition(":")
        runs.append((label or Path(path).stem, json.loads(Path(path).read_text(encoding="utf-8"))))
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / (2 * len(runs))
    for k, (label, data) in enumerate(runs):
        for j, phase in enumerate(("warm", "cold")):
            xs, ys = [], []
            for c, name in enumerate(COMMANDS):
                cell = data.get(f"{name}_{phase}")
                if cell:
                    xs.append(c + (2 * k + j) * width - 0.4 + width / 2)
                    ys.append(cell["median_ms"])
            ax.bar(xs, ys, width, label=f"{label} {phase}", alpha=1.0 if phase == "warm" else 0.5)
    for c, name in enumerate(COMMANDS):
        if name in TARGETS_MS:
            ax.hlines(TARGETS_MS[name], c - 0.45, c + 0.45, colors="black", linestyles="dashed")
    ax.hlines([600, 1000], 1 - 0.45, 1 + 0.45, colors=["black", "grey"], linestyles="dashed")
    ax.set_xticks(range(len(COMMANDS)), COMMANDS)
    ax.set_ylabel("whole-process median (ms)")
    ax.set_title("mnemon at scale (dashed: targets)")
    ax.legend(fontsize=7, ncol=2)
    fig.savefig(args.out, dpi=90, bbox_inches="tight")
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
