"""Routes for the edges no single curve draws clear of the boxes (an edge from step t-1 into a gate's
pre-activation, under a row of gates): a path of horizontal and vertical runs through the corridors between
the boxes, the shortest with the fewest bends, drawn with rounded corners. The runs of one source's routes are
shared (they read as one line that branches), those of another source's avoided where there is room."""

import heapq
import itertools

MARGIN = 0.1  # centimetres between a run and a box it passes
BEND = 0.8  # the cost of a bend, in centimetres of run
HUGGING = 1.6  # the cost of a centimetre along a box's margin, against one along a corridor's middle
OTHERS = 4.0  # the cost of a centimetre along another source's run
OWN = 0.4  # the cost of a centimetre along the same source's run


def detour(boxes, frame, source, target, taken):
    """The corners of a route from the centre of box `source` to the centre of box `target` (keys of `boxes`, each
    (x, y, half width, half height)) inside `frame`, or None; taken: {run between two corners: its source}, which
    the route is added to."""
    xs, ys = _lines(boxes.values(), frame, 0), _lines(boxes.values(), frame, 1)
    order = (list(xs), list(ys))
    index = ({x: n for n, x in enumerate(order[0])}, {y: n for n, y in enumerate(order[1])})
    blocked = [b for key, b in boxes.items() if key not in (source, target)]

    def free(point):
        return not any(_inside(point, b) for b in blocked)

    start, goal = boxes[source][:2], boxes[target][:2]
    best, queue, came = {}, [(0.0, start, None, None)], {}
    while queue:
        cost, point, heading, before = heapq.heappop(queue)
        if (point, heading) in came:
            continue
        came[(point, heading)] = before
        if point == goal:
            route = _unwound(came, (point, heading))
            taken.update({run: source for run in itertools.pairwise(route)})
            return _corners(route)
        for step, after in _neighbours(point, order, index):
            if not free(after):
                continue
            run = (point, after)
            price = _length(run) * (xs[after[0]] if step in "lr" else ys[after[1]])
            owner = taken.get(run, taken.get((after, point)))
            price *= 1.0 if owner is None else OWN if owner == source else OTHERS
            total = cost + price + (BEND if heading not in (None, step) else 0.0)
            if total < best.get((after, step), float("inf")):
                best[(after, step)] = total
                heapq.heappush(queue, (total, after, step, (point, heading)))
    return None


def _lines(boxes, frame, axis):
    """{coordinate: the cost of a centimetre along it} of the runs along one axis: each box's centre and its
    margins, the middles between, and the frame's edges."""
    low = frame[axis] - frame[axis + 2]
    high = frame[axis] + frame[axis + 2]
    edges = sorted({round(b[axis] + side * (b[axis + 2] + MARGIN), 3) for b in boxes for side in (-1, 1)})
    lines = {value: HUGGING for value in edges if low <= value <= high}
    lines.update({round(b[axis], 3): 1.0 for b in boxes})
    ordered = sorted({low, high, *edges})
    lines.update({round((a + b) / 2, 3): 1.0 for a, b in itertools.pairwise(ordered) if b - a > 2 * MARGIN})
    lines.setdefault(low, 1.0)
    lines.setdefault(high, 1.0)
    return dict(sorted(lines.items()))


def _neighbours(point, order, index):
    """(direction, the next crossing of the lines that way) for each of the four directions."""
    (x, y), (xs, ys) = point, order
    i, j = index[0][x], index[1][y]
    if i > 0:
        yield "l", (xs[i - 1], y)
    if i + 1 < len(xs):
        yield "r", (xs[i + 1], y)
    if j > 0:
        yield "d", (x, ys[j - 1])
    if j + 1 < len(ys):
        yield "u", (x, ys[j + 1])


def _inside(point, node_box):
    x, y, half_w, half_h = node_box
    return abs(point[0] - x) < half_w + MARGIN - 1e-9 and abs(point[1] - y) < half_h + MARGIN - 1e-9


def _length(run):
    (x0, y0), (x1, y1) = run
    return abs(x1 - x0) + abs(y1 - y0)


def _unwound(came, state):
    route = []
    while state is not None:
        route.append(state[0])
        state = came[state]
    return route[::-1]


def _corners(route):
    """The route without the points where it runs straight on."""
    kept = [route[0]]
    for before, point, after in zip(route, route[1:], route[2:], strict=False):
        if (before[0] == point[0] == after[0]) or (before[1] == point[1] == after[1]):
            continue
        kept.append(point)
    return (*kept, route[-1])
