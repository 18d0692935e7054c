"""The oracle's run of a model with reverse-time states (oracle.py's run calls it): every assignment evaluated sweep by
sweep (derive/direction.py), each in the order its sweep visits the steps, a reverse sweep from step T back to step
1, its states' initial values entering at T+1; then each step's outputs and loss. Written from the equations: it
shares no code with bptt.codegen or the runtime.

Truncation, each recursion on its own (a recursion: the assignments of one direction that read each other across
steps, or reach each other through the step; intermediates joined to the states they read across steps):
  ("chunk", k):       a state read by the next step of its own direction (step s+1 forward, s-1 in reverse) enters
                      it detached when its index in that direction (s forward, T+1-s in reverse) is a multiple of k;
  ("random", pi):     that read's gradient is scaled by keep[state][index] (0 or 1/pi), the weights given;
  ("window", k):      a value of a recursion read at step s (by an output, or by another recursion at s) is rerun
                      over the recursion's k steps before s in its own direction, from its states there detached (from
                      its initial states, attached, when the window reaches them), reading the other recursions'
                      values at each step of the rerun windowed the same way: each recursion the gradient enters
                      gives it k steps of its own.
"""

from functools import lru_cache

from bptt.derive.direction import FORWARD, directions, sweeps
from bptt.derive.nodes import SeqAt, references, t
from bptt.tests.support.oracle_eval import Scope, compiled


def run_sweeps(problem, mode, k, keep=None):
    """([outputs of each step], [loss of each step (B,)]) of problem's model; mode, k: its truncation (full, chunk,
    window, random: k then the probability, keep {state name: weights by index} given)."""
    model = problem.model
    way = {seq.name: direction for seq, direction in directions(model).items()}
    values = {0: dict(problem.initial), problem.T + 1: dict(problem.initial)}
    values |= {step: {name: data[step - 1] for name, data in problem.data.items()} for step in range(1, problem.T + 1)}
    weigh = _weights(problem.T, mode, k, keep)
    for sweep in sweeps(model):
        assignments = [(seq.name, compiled(_as_read_at_t_minus_1(rhs))) for seq, rhs in sweep.steps]
        for step in sweep.times(problem.T):
            scope = _sweep_scope(problem, way, values, step, weigh)
            for name, value in assignments:
                scope.now[name] = values[step][name] = value(scope)
    if mode == "window":
        read = _Windowed(problem, way, values, k).at
    else:

        def read(name, step):
            return values[step][name]

    outputs, losses = [], []
    names = {ref.name for _, rhs in model.outputs for ref in rhs.atoms(SeqAt) if ref.time == t}
    heads, step_loss = [(seq.name, compiled(rhs)) for seq, rhs in model.outputs], compiled(model.concrete_loss())
    for step in range(1, problem.T + 1):
        scope = Scope(problem.sizes, problem.params, {name: read(name, step) for name in names})
        scope.now |= {name: data[step - 1] for name, data in problem.data.items()}
        for name, value in heads:
            scope.now[name] = value(scope)
        outputs.append({name: scope.now[name] for name, _ in heads})
        losses.append(step_loss(scope))
    return outputs, losses


def _weights(T, mode, k, keep):
    """weigh(state name, index): the weight of the gradient flowing back through the state's read by the next step
    of its direction, the state at index (1.. in its direction; 0 its initial value): None for 1."""

    def weigh(name, index):
        if mode == "chunk" and index > 0 and index % k == 0:
            return 0.0
        if mode == "random":
            return float(keep[name][index])
        return None

    return weigh


def _weighted(value, weight):
    """value, its gradient scaled by weight (0: detached)."""
    if weight is None or weight == 1:
        return value
    frozen = value.detach()
    return frozen if weight == 0 else frozen + weight * (value - frozen)


def _sweep_scope(problem, way, values, step, weigh):
    """A step's Scope: its data and every value computed at it so far; as `before`, each state computed so far at
    the step it reads (a forward state's at step - 1, a reverse one's at step + 1: evaluate reads both as t-1),
    weighted by weigh (the index of the state it reads in its own direction)."""
    before = {}
    for name, direction in way.items():
        held = values.get(step - 1 if direction == FORWARD else step + 1, {})
        if name in held:
            index = step - 1 if direction == FORWARD else problem.T - step
            before[name] = _weighted(held[name], weigh(name, index))
    return Scope(problem.sizes, problem.params, dict(values[step]), before)


@lru_cache(maxsize=1 << 12)
def _as_read_at_t_minus_1(expr):
    """expr with its reads at t+1 written at t-1: a state is read at one of the two only, and the scope holds
    the value it reads under its name."""
    later = {ref: SeqAt(ref.name, t - 1, ref.rows, ref.role) for ref in expr.atoms(SeqAt) if ref.time == t + 1}
    return expr.xreplace(later) if later else expr


def recursions(model):
    """{assignment name: the frozenset of its recursion's names}, for the assignments of a recursion (it holds a
    state); an assignment that reads no state across steps, and is read by none across steps, has none."""
    joined = {}
    for sweep in sweeps(model):
        names = [seq.name for seq, _ in sweep.steps]
        reads = {seq.name: {ref.name for ref in references(rhs)} & set(names) for seq, rhs in sweep.steps}
        across = {seq.name: {ref.name for ref in references(rhs) if ref.time != t} for seq, rhs in sweep.steps}
        reach = {name: _reach(name, reads) for name in names}
        parts = {name: {name} for name in names}
        for a in names:
            for b in names:
                if b in across[a] or (a in reach[b] and b in reach[a]):
                    merged = parts[a] | parts[b]
                    for name in merged:
                        parts[name] = merged
        states = {seq.name for seq in model.states}
        joined |= {name: frozenset(part) for name, part in parts.items() if part & states}
    return joined


def _reach(name, reads):
    seen, todo = set(), [name]
    while todo:
        for other in reads[todo.pop()] - seen:
            seen.add(other)
            todo.append(other)
    return seen


class _Windowed:
    """Windowed values: at(name, step) is the value of an assignment (or data) at step as a reader at that step sees
    it: a recursion's rerun over its window ending at step, each rerun step reading the other recursions' values at
    it windowed in turn; a value of no recursion evaluated at the step from the windowed values it reads."""

    def __init__(self, problem, way, values, k):
        self.problem, self.way, self.values, self.k = problem, way, values, k
        self.part = recursions(problem.model)
        self.rhs = {seq.name: _as_read_at_t_minus_1(rhs) for seq, rhs in problem.model.assignments}
        self.value = {name: compiled(rhs) for name, rhs in self.rhs.items()}  # of a Scope
        self.order = [seq.name for sweep in sweeps(problem.model) for seq, _ in sweep.steps]
        self.memo = {}

    def at(self, name, step):
        if name in self.problem.data:
            return self.problem.data[name][step - 1]
        key = (self.part.get(name, frozenset({name})), step)
        if key not in self.memo:
            self.memo[key] = self._rerun(*key) if name in self.part else {name: self._alone(name, step)}
        return self.memo[key][name]

    def _reads_at_t(self, names):
        return {ref.name for name in names for ref in self.rhs[name].atoms(SeqAt) if ref.time == t} - set(names)

    def _alone(self, name, step):
        scope = Scope(self.problem.sizes, self.problem.params)
        scope.now = {other: self.at(other, step) for other in self._reads_at_t([name])}
        return self.value[name](scope)

    def _rerun(self, part, step):
        """The recursion's values at step, rerun over the k steps before it in its own direction."""
        states = [seq.name for seq in self.problem.model.states if seq.name in part]
        forward = self.way[states[0]] == FORWARD
        T, k = self.problem.T, self.k
        first = step - k if forward else step + k
        if 1 <= first <= T:
            entering = self.values[first - 1 if forward else first + 1]
            before = {name: entering[name].detach() for name in states}
        else:
            first = 1 if forward else T
            before = {name: self.problem.initial[name] for name in states}
        mine = [name for name in self.order if name in part]
        reads = self._reads_at_t(mine)
        for now in range(first, step + 1) if forward else range(first, step - 1, -1):
            scope = Scope(self.problem.sizes, self.problem.params, {n: self.at(n, now) for n in reads}, before)
            for name in mine:
                scope.now[name] = self.value[name](scope)
            before = {name: scope.now[name] for name in states}
        return {name: scope.now[name] for name in mine}
