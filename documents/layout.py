"""Where the nodes of an unrolled graph go: a column per step (step 0, the initial states, a narrow one, a
node a level), each value at the level of the longest chain of same-step reads below it, and within a level
placed under the values it feeds and above those it reads (three barycentre sweeps), never closer than a
node's width. A level with more values than a step's column holds side by side (the eight gates of two LSTM
chains) takes as many rows as it needs, its values shared among them in order."""

import itertools
from collections import defaultdict
from dataclasses import replace

COLUMN = 4.6  # centimetres per step
FIRST = 1.4  # from step 0's column to step 1's left edge
LAST = 0.6  # from the last step's right edge to the column of reverse-time states' initial values
RISE = 0.8  # between levels
GAP = 1.05  # the least distance of two nodes' centres in a level
MARGIN = 0.15  # the least room between two nodes' boxes in a level
GUTTER = 0.3  # the least room between the boxes of two steps' columns


def laid_out(nodes, edges, loss, half_width, final=None):
    """The nodes with x and y set; `loss` the name of the loss nodes, whose labels stand beside them;
    half_width(node) half the width of a node's box, in centimetres; final: the step after the last one drawn,
    where reverse-time states' initial values stand, in a narrow column like step 0's."""
    halves = {node.key: half_width(node) for node in nodes}
    level = _levels(nodes, edges, loss, halves, final)
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
        x.update(_spread([(key, _centre(step, final)) for key in keys], step, halves, final))
    for neighbours, upwards in ((reads, True), (feeds, False), (reads, True)):
        for step, height in sorted(rows, key=lambda row: row[1], reverse=not upwards):
            keys = rows[(step, height)]
            wanted = [
                (key, sum(x[n] for n in neighbours[key]) / len(neighbours[key]) if neighbours[key] else x[key])
                for key in keys
            ]
            x.update(_spread(sorted(wanted, key=lambda item: item[1]), step, halves, final))
    return [replace(node, x=round(x[node.key], 3), y=round(level[node.key] * RISE, 3)) for node in nodes]


def _centre(step, final=None):
    if step == final:  # nearer its neighbour than step 0 is: the page holds the drawing
        return FIRST + (step - 1) * COLUMN + LAST
    return 0.0 if step == 0 else FIRST + (step - 0.5) * COLUMN


def _levels(nodes, edges, loss, halves, final=None):
    """The longest chain of same-step reads below each node, a level too wide for a column in several rows; an
    initial state at the level of its later values, a label beside the loss that reads it."""
    level = {node.key: 0 for node in nodes}
    forward = [e for e in edges if not e.backward]
    for _ in nodes:  # relaxed until stable: the reads within a step form no cycle
        for edge in forward:
            if edge.source[1] == edge.target[1]:
                level[edge.target] = max(level[edge.target], level[edge.source] + 1)
    _split_wide_levels(nodes, level, halves, final)
    _initial_levels(nodes, level, 0, 1)
    if final is not None:
        _initial_levels(nodes, level, final, final - 1)
    for node in nodes:
        if node.role in ("label", "target") and any(e.source == node.key and e.target[0] == loss for e in forward):
            level[node.key] = level[(loss, node.step)]
    return level


def _split_wide_levels(nodes, level, halves, final):
    """Each level in as many rows as the widest step's values in it need to stand apart in its column (_fits), each
    row a run of them in the nodes' order; the levels above move up by the rows added."""
    rows = defaultdict(list)
    for node in nodes:
        if node.step not in (0, final):
            rows[(node.step, level[node.key])].append(node.key)
    count = defaultdict(lambda: 1)
    for (step, height), keys in rows.items():
        count[height] = max(count[height], next(k for k in range(1, len(keys) + 1) if _fits(keys, k, step, halves)))
    if all(count[height] == 1 for height in set(level.values())):
        return
    start, rows_below = {}, 0
    for height in range(max(level.values()) + 1):
        start[height], rows_below = rows_below, rows_below + count[height]
    for node in nodes:
        keys = rows.get((node.step, level[node.key]), [node.key])
        level[node.key] = start[level[node.key]] + keys.index(node.key) * count[level[node.key]] // len(keys)


def _fits(keys, parts, step, halves):
    """Whether keys shared in order among `parts` rows stand apart in the step's column, every box clear of the next."""
    for part in range(parts):
        row = [key for n, key in enumerate(keys) if n * parts // len(keys) == part]
        gaps, squeeze = _gaps(row, step, halves)
        if any(
            gap * squeeze < halves[a] + halves[b] for gap, (a, b) in zip(gaps, itertools.pairwise(row), strict=True)
        ):
            return False
    return True


def _initial_levels(nodes, level, column, beside):
    """Each initial state of a column (step 0, or the final one) at the level of its value at step `beside`, or
    the nearest level no other initial state takes (the column is one node wide); those with such a value first.
    A cell of more initial states than levels gets levels above its highest, one each."""
    initial = sorted((n for n in nodes if n.step == column), key=lambda n: (n.name, beside) not in level)
    levels = range(max(max(level.values(), default=0) + 2, len(initial)))
    taken = set()
    for node in initial:
        wanted = level.get((node.name, beside), 0)
        free = min((n for n in levels if n not in taken), key=lambda n: (abs(n - wanted), n))
        level[node.key] = free
        taken.add(free)


def _spread(wanted, step, halves, final=None):
    """(key, x) of a level, in order: each at its wanted x or right of the one before by GAP or by their boxes'
    half widths and MARGIN (less where the column is too narrow), the row then moved back into its column, every
    box inside it (step 0's centres within a narrow band)."""
    keys = [key for key, _ in wanted]
    low, high = _bounds(keys, step, halves, final)
    gaps, squeeze = _gaps(keys, step, halves, final)
    placed = []
    for n, (key, want) in enumerate(wanted):
        placed.append((key, want if not placed else max(want, placed[-1][1] + gaps[n - 1] * squeeze)))
    shift = sum(w for _, w in wanted) / len(wanted) - sum(p for _, p in placed) / len(placed)
    shift = min(max(shift, low - placed[0][1]), high - placed[-1][1])
    return {key: position + shift for key, position in placed}


def _bounds(keys, step, halves, final=None):
    """The least and the greatest centre of a row of keys in its step's column (step 0's and the final one's within
    a narrow band)."""
    if step in (0, final):
        return _centre(step, final) - 0.25, _centre(step, final) + 0.25
    room = (COLUMN - GUTTER) / 2
    return _centre(step) - room + halves[keys[0]], _centre(step) + room - halves[keys[-1]]


def _gaps(keys, step, halves, final=None):
    """(the distance each of a row's centres wants from the one before, the factor all of them are multiplied by
    to fit the column)."""
    low, high = _bounds(keys, step, halves, final)
    gaps = [max(GAP, halves[a] + halves[b] + MARGIN) for a, b in itertools.pairwise(keys)]
    return gaps, min(1.0, (high - low) / sum(gaps)) if gaps else 1.0
