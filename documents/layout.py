"""Where the nodes of an unrolled graph go: a column per step (step 0, the initial states, a narrow one),
each value at the level of the longest chain of same-step reads below it, and within a level placed under
the values it feeds and above those it reads (three barycentre sweeps), never closer than a node's width."""

from collections import defaultdict
from dataclasses import replace

COLUMN = 4.6  # centimetres per step
FIRST = 1.4  # from step 0's column to step 1's left edge
RISE = 0.8  # between levels
GAP = 1.05  # the least distance of two nodes of a level


def laid_out(nodes, edges, loss):
    """The nodes with x and y set; `loss` the name of the loss nodes, whose labels stand beside them."""
    level = _levels(nodes, edges, loss)
    rows = defaultdict(list)
    for node in nodes:
        rows[(node.step, level[node.key])].append(node.key)
    reads, feeds = defaultdict(list), defaultdict(list)
    for edge in edges:
        if not edge.backward and edge.source[1] == edge.target[1]:
            reads[edge.target].append(edge.source)
            feeds[edge.source].append(edge.target)
    x = {}
    for (step, _), keys in rows.items():
        x.update(_spread([(key, _centre(step)) for key in keys], step))
    for neighbours, upwards in ((reads, True), (feeds, False), (reads, True)):
        for step, height in sorted(rows, key=lambda row: row[1], reverse=not upwards):
            keys = rows[(step, height)]
            wanted = [
                (key, sum(x[n] for n in neighbours[key]) / len(neighbours[key]) if neighbours[key] else x[key])
                for key in keys
            ]
            x.update(_spread(sorted(wanted, key=lambda item: item[1]), step))
    return [replace(node, x=round(x[node.key], 3), y=round(level[node.key] * RISE, 3)) for node in nodes]


def _centre(step):
    return 0.0 if step == 0 else FIRST + (step - 0.5) * COLUMN


def _levels(nodes, edges, loss):
    """The longest chain of same-step reads below each node; an initial state at the level of its later values, a
    label beside the loss that reads it."""
    level = {node.key: 0 for node in nodes}
    forward = [e for e in edges if not e.backward]
    for _ in nodes:  # relaxed until stable: the reads within a step form no cycle
        for edge in forward:
            if edge.source[1] == edge.target[1]:
                level[edge.target] = max(level[edge.target], level[edge.source] + 1)
    for node in nodes:
        if node.step == 0:
            level[node.key] = level.get((node.name, 1), 0)
        if node.role in ("label", "target") and any(e.source == node.key and e.target[0] == loss for e in forward):
            level[node.key] = level[(loss, node.step)]
    return level


def _spread(wanted, step):
    """(key, x) of a level, in order: each at its wanted x or right of the one before by GAP (less where the
    column is too narrow), the row then moved back into its column."""
    half = (0.5 if step == 0 else COLUMN - 0.5) / 2
    gap = GAP if len(wanted) < 2 else min(GAP, 2 * half / (len(wanted) - 1))
    placed = []
    for key, want in wanted:
        placed.append((key, want if not placed else max(want, placed[-1][1] + gap)))
    shift = sum(w for _, w in wanted) / len(wanted) - sum(p for _, p in placed) / len(placed)
    low, high = _centre(step) - half, _centre(step) + half
    shift = min(max(shift, low - placed[0][1]), high - placed[-1][1])
    return {key: position + shift for key, position in placed}
