"""Breadth-first search over the edge graph (contract §4.11): ``related`` and causal candidates.

``neighbours(node)`` yields both directions of every edge row touching ``node`` in rowid order,
so the discovery order (and therefore the output) is deterministic. Plain Python: the neighbourhoods are small.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BfsHit:
    id: str
    depth: int
    via: str


def bfs(
    start: str,
    neighbours: Callable[[str], Sequence[tuple[str, str]]],
    max_depth: int,
    max_nodes: int,
    *,
    edge_type: str | None = None,
    is_active: Callable[[str], bool] = lambda _id: True,
) -> list[BfsHit]:
    """Visit neighbours of ``start`` up to ``max_depth`` hops; at most ``max_nodes`` results.

    The start is excluded from the output; inactive nodes are skipped (not traversed); with
    ``edge_type`` only edges of that type are followed. Each hit records its hop count and the
    edge type it was discovered through.
    """
    visited = {start}
    out: list[BfsHit] = []
    queue: deque[tuple[str, int]] = deque([(start, 0)])
    while queue:
        node, depth = queue.popleft()
        if depth >= max_depth:
            continue
        for neighbour, etype in neighbours(node):
            if neighbour in visited or (edge_type is not None and etype != edge_type):
                continue
            visited.add(neighbour)
            if not is_active(neighbour):
                continue
            out.append(BfsHit(neighbour, depth + 1, etype))
            if len(out) >= max_nodes:
                return out
            queue.append((neighbour, depth + 1))
    return out
