"""Routes for the edges no single curve draws clear of the boxes (an edge from step t-1 into a gate's
pre-activation, under a row of gates): a path of horizontal and vertical runs through the corridors between
the boxes, the shortest with the fewest bends, drawn with rounded corners. The runs of one source's routes are
shared (they read as one line that branches), those of another source's avoided where there is room."""

import bisect
import heapq
import itertools
import math
from collections import defaultdict

MARGIN = 0.1  # centimetres between a run and a box it passes
BEND = 0.8  # the cost of a bend, in centimetres of run
HUGGING = 1.6  # the cost of a centimetre along a box's margin, against one along a corridor's middle
OTHERS = 4.0  # the cost of a centimetre along another source's run
OWN = 0.4  # the cost of a centimetre along the same source's run
REACH = 1.5  # centimetres a route may run left or right of its two ends
HASTE = 1.5  # the weight of the length left in the search's guess: a route found soon, nearly the cheapest


class Corridors:
    """The lines a figure's detours run along, and which boxes (grown by MARGIN) hold each of their crossings,
    a crossing named by its lines' indices."""

    def __init__(self, boxes, frame):
        self.boxes = boxes
        xs, ys = _lines(boxes.values(), frame, 0), _lines(boxes.values(), frame, 1)
        self.xs, self.ys = list(xs), list(ys)
        self.price = (list(xs.values()), list(ys.values()))  # of a centimetre along each line
        self.holders = defaultdict(set)
        for key, (x, y, half_w, half_h) in boxes.items():
            for a in _within(self.xs, x, half_w + MARGIN):
                for b in _within(self.ys, y, half_h + MARGIN):
                    self.holders[(a, b)].add(key)
        self.steps = [None] * (len(self.xs) * len(self.ys))  # each crossing's, found as the search reaches it
        self.held = [self.holders.get(divmod(n, len(self.ys))) for n in range(len(self.xs) * len(self.ys))]

    def route(self, source, target, taken):
        """The corners of a route from the centre of box `source` to the centre of box `target` (keys of the
        boxes), or None; taken: {run between two crossings: its source}, which the route is added to. Sought
        first within REACH of its ends, left and right."""
        ends = [self.boxes[key][:2] for key in (source, target)]
        start, goal = [(self.xs.index(x), self.ys.index(y)) for x, y in ends]
        low, high = min(p[0] for p in ends) - REACH, max(p[0] for p in ends) + REACH
        near = (bisect.bisect_left(self.xs, low), bisect.bisect_right(self.xs, high) - 1)
        route = self._search(start, goal, source, {source, target}, taken, near)
        route = route or self._search(start, goal, source, {source, target}, taken, (0, len(self.xs) - 1))
        if route is None:
            return None
        taken.update({(min(run), max(run)): source for run in itertools.pairwise(route)})
        return _corners([(self.xs[n // len(self.ys)], self.ys[n % len(self.ys)]) for n in route])

    def _search(self, start, goal, source, ends, taken, columns):
        """A*, weighted by HASTE, over (crossing, heading): the numbers of the crossings from start to goal, or
        None. A crossing (i, j) is numbered i * len(ys) + j, which orders the numbers as it would the pairs, and
        a crossing n reached heading h (-1 at the start) is the state 3 n + h + 1, ordered as (n, h) would be."""
        held, rows, found = self.held, len(self.ys), self.steps
        gx, gy = self.xs[goal[0]], self.ys[goal[1]]
        rest_x, rest_y = [abs(x - gx) for x in self.xs], [abs(y - gy) for y in self.ys]
        low, high = columns
        goal = goal[0] * rows + goal[1]
        best, came = [math.inf] * (3 * len(held)), [None] * (3 * len(held))  # came: the state before, once closed
        queue = [(0.0, 0.0, start[0] * rows + start[1], -1, -1)]
        pop, push = heapq.heappop, heapq.heappush
        while queue:
            _, cost, point, heading, before = pop(queue)
            state = 3 * point + heading + 1
            if came[state] is not None:
                continue
            came[state] = before
            if point == goal:
                return _unwound(came, state)
            in_end = held[point] is not None  # no bend inside an end's box: TikZ draws the runs over it
            for step, after, reached, a, b, length, run in found[point] or self._neighbours(point):
                if came[reached] is not None or not low <= a <= high:
                    continue  # a state already closed would be skipped when popped
                if held[after] is not None and not held[after] <= ends:
                    continue
                bends = heading != -1 and heading != step
                if bends and in_end:
                    continue
                owner = taken.get(run)
                price = length if owner is None else length * (OWN if owner == source else OTHERS)
                total = cost + price + BEND if bends else cost + price
                if total < best[reached]:
                    best[reached] = total
                    push(queue, (total + HASTE * (rest_x[a] + rest_y[b]), total, after, step, state))
        return None

    def _neighbours(self, n):
        """The steps from crossing number n, found once: [(heading, the next crossing's number, the state it
        reaches, its indices a and b, the run's price, the run's key in `taken`)], left, right, down, up."""
        xs, ys, (along_x, along_y) = self.xs, self.ys, self.price
        rows = len(ys)
        i, j = divmod(n, rows)
        found = self.steps[n] = []
        if i > 0:
            found.append((0, n - rows, 3 * (n - rows) + 1, i - 1, j, (xs[i] - xs[i - 1]) * along_y[j], (n - rows, n)))
        if i + 1 < len(xs):
            found.append((0, n + rows, 3 * (n + rows) + 1, i + 1, j, (xs[i + 1] - xs[i]) * along_y[j], (n, n + rows)))
        if j > 0:
            found.append((1, n - 1, 3 * (n - 1) + 2, i, j - 1, (ys[j] - ys[j - 1]) * along_x[i], (n - 1, n)))
        if j + 1 < rows:
            found.append((1, n + 1, 3 * (n + 1) + 2, i, j + 1, (ys[j + 1] - ys[j]) * along_x[i], (n, n + 1)))
        return found


def _within(line, centre, half):
    """The indices of the values of a sorted line strictly within half of centre."""
    return range(bisect.bisect_right(line, centre - half + 1e-9), bisect.bisect_left(line, centre + half - 1e-9))


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


def _unwound(came, state):
    """The crossings' numbers from the start to the state's crossing."""
    route = []
    while state != -1:
        route.append(state // 3)
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
