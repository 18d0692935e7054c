"""An oracle for the generated modules that shares no code with bptt.codegen or bptt.generated.

run() interprets a Model's step equations in torch (float64), one step at a time, with the
evaluator of oracle_eval.py, and takes the gradients from torch.autograd; compare() checks a
generated NumPy, torch or JAX module against it.

    run(model, params, xs, ys, initial=None, truncate=None) -> Result
    read_only(result) -> result, its arrays read-only (a run shared by several tests)
    loss(model, params, xs, ys, initial=None) -> float (run's loss, without autograd)
    compare(module, model, params, xs, ys, initial=None, truncate=None, tol=1e-12, forward_mode=False)

Layout as the generated modules': time-major xs (T, B, d), or (T, B) integer labels; ys (T, B, q)
or (T, B) labels; parameters in the maths' shapes (vectors 1-D); initial states (B, rows), keyed by
the state's name (or by its gradient key, h0), zeros if not given; gradient keys: the parameters'
names and <state>0 for every state.

Truncation (derive/truncation.py; as the generated modules do it):
  ("chunk", k):  the states entering step s + 1 are detached when k divides s (s >= 1);
  ("window", k): output j's gradient reaches the states of step s only if j - s <= k: steps
                 j-k..j are rerun from the detached states of step j-k-1 (from the initial
                 states when j <= k), and the per-output gradients summed.
A teacher-forced state is data entering the next step, like an input, and is never detached
(app/verify/check.py's truncated losses say the same): its initial value o_0 feeds step 1, so
its gradient comes from every output whose window holds step 1 (j <= k + 1), not only j <= k.

Reverse-time states (read at t+1): the steps run sweep by sweep (derive/direction.py), a reverse sweep from step T
back to step 1, its states' initial values (keyed <state>0 too) entering at T+1; truncated recursion by recursion
(oracle_sweeps.py says how).
"""

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import sympy as sp
import torch

from bptt.derive.direction import reverse_states
from bptt.derive.nodes import SeqAt
from bptt.tests.support.oracle_eval import DTYPE, OracleError, Scope, compiled, size_of
from bptt.tests.support.oracle_sweeps import run_sweeps

STEPS, BATCH = sp.Dummy("T"), sp.Dummy("B")  # the leading dimensions of xs, ys and the states


@dataclass
class Result:
    outputs: dict  # output name -> (T, B, rows)
    loss: float  # summed over steps (divided by T if model.mean), averaged over the batch
    grads: dict  # parameter name or <state>0 -> array of its shape


@dataclass
class Problem:
    """A model and one batch, as tensors: parameters and initial states are autograd leaves."""

    model: object
    sizes: dict
    params: dict  # name -> leaf (rows, cols)
    initial: dict  # state name -> leaf (B, rows, 1)
    data: dict  # sequence name -> (T, B, rows, 1), or (T, B) labels
    T: int
    B: int


@dataclass
class Record:
    """One step's values: its states, outputs and per-sample loss (B,)."""

    states: dict
    outputs: dict
    loss: torch.Tensor


def run(model, params, xs, ys, initial=None, truncate=None, keep=None):
    """The outputs, loss and gradients of model on one batch (see the module's docstring);
    truncate: None, ("window", k) or ("chunk", k); with reverse-time states also ("random", pi), its weights keep
    ({state name: weight by index}, oracle_sweeps.py) given."""
    if reverse_states(model):
        return _run_sweeps(model, params, xs, ys, initial, truncate, keep=keep)
    mode, k = _truncation(truncate)
    problem = _problem(model, params, xs, ys, initial or {})
    records = _steps(problem, 1, problem.T, problem.initial, cut=k if mode == "chunk" else None)
    loss = _total(problem, [record.loss for record in records])
    if mode == "window":
        target = _total(problem, [_window_loss(problem, records, j, k) for j in range(1, problem.T + 1)])
    else:
        target = loss
    leaves = {**problem.params, **{f"{name}0": leaf for name, leaf in problem.initial.items()}}
    found = torch.autograd.grad(target, list(leaves.values()), allow_unused=True)
    grads = {}
    for (key, leaf), grad in zip(leaves.items(), found, strict=True):
        grad = torch.zeros_like(leaf) if grad is None else grad
        shape = np.shape(params[key]) if key in problem.params else leaf.shape[:-1]
        grads[key] = grad.detach().reshape(shape).numpy()
    outputs = {
        name: torch.stack([r.outputs[name][..., 0] for r in records]).detach().numpy() for name in records[0].outputs
    }
    return Result(outputs, float(loss.detach()), grads)


def read_only(result):
    """result with its arrays read-only: one run shared by several tests (several backends' modules), none of which
    may change it."""
    for array in [*result.outputs.values(), *result.grads.values()]:
        array.setflags(write=False)
    return result


def loss(model, params, xs, ys, initial=None):
    """run(...).loss (full BPTT's loss) without recording autograd's graph: what finite differences need."""
    if reverse_states(model):
        with torch.no_grad():
            return _run_sweeps(model, params, xs, ys, initial, None, grads=False).loss
    with torch.no_grad():
        problem = _problem(model, params, xs, ys, initial or {})
        return float(_total(problem, [record.loss for record in _steps(problem, 1, problem.T, problem.initial)]))


def _steps(problem, first, last, entering, cut=None):
    """Steps first..last from the states `entering` (at step first - 1); with cut k, the states
    that enter step s + 1 are detached when k divides s (chunked truncation)."""
    model, states, records = problem.model, dict(entering), []
    forced = {seq.name: value for seq, value in model.teacher_forcing}
    assignments = [(seq.name, compiled(forced.get(seq.name, rhs))) for seq, rhs in model.assignments]
    step_loss = compiled(model.concrete_loss())
    for step in range(first, last + 1):
        now = {name: values[step - 1] for name, values in problem.data.items()}
        scope = Scope(problem.sizes, problem.params, now, states)
        for name, value in assignments:
            scope.now[name] = value(scope)
        states = {seq.name: scope.now[seq.name] for seq in model.states}
        outputs = {seq.name: scope.now[seq.name] for seq, _ in model.outputs}
        records.append(Record(states, outputs, step_loss(scope)))
        if cut and step % cut == 0:
            states = {name: value.detach() for name, value in states.items()}
    return records


def _window_loss(problem, records, j, k):
    """l_j with its gradient flowing back at most k steps: steps j-k..j rerun from the states
    before them, detached; from the initial states when j <= k. Teacher-forced states are data
    entering a step, like inputs: never detached."""
    if j <= k:
        return _steps(problem, 1, j, problem.initial)[-1].loss
    before = problem.initial if j - k == 1 else records[j - k - 2].states
    forced = {seq.name for seq, _ in problem.model.teacher_forcing}
    entering = {name: value if name in forced else value.detach() for name, value in before.items()}
    return _steps(problem, j - k, j, entering)[-1].loss


def _total(problem, losses):
    """L = sum_t l_t (over T for a mean), averaged over the batch."""
    total = sum(loss.sum() for loss in losses) / problem.B
    return total / problem.T if problem.model.mean else total


def _truncation(truncate, keep=None):
    """(mode, k) of a truncate argument; ("random", pi) with the weights keep given (reverse-time states only)."""
    if truncate is None:
        return "full", None
    if isinstance(truncate, tuple) and len(truncate) == 2 and truncate[0] in ("window", "chunk"):
        if isinstance(truncate[1], int) and truncate[1] >= 1:
            return truncate
    if isinstance(truncate, tuple) and len(truncate) == 2 and truncate[0] == "random" and keep is not None:
        return truncate
    raise OracleError(f"truncate must be None, ('window', k) or ('chunk', k) with k >= 1; got {truncate!r}")


def _problem(model, params, xs, ys, initial):
    """The batch as tensors, the sizes bound from the parameters' shapes, every shape checked."""
    names = [p.name for p in model.params]
    if sorted(params) != sorted(names):
        raise OracleError(f"params has keys {sorted(params)}; expected {sorted(names)}")
    sizes = {}
    for symbol in model.params:
        _bind(sizes, symbol.shape, np.shape(params[symbol.name]), f"params[{symbol.name!r}]")
    leaves = {}
    for symbol in model.params:
        array = np.asarray(params[symbol.name], dtype=np.float64)
        leaves[symbol.name] = torch.tensor(array.reshape(array.shape[0], -1), requires_grad=True)
    (source,) = model.inputs
    data = {source.name: _sequence_data(source, xs, sizes, "xs")}
    for ref in _data_references(model):
        if ref.name != source.name:
            data[ref.name] = _sequence_data(ref, ys, sizes, "ys")
    T, B = np.shape(xs)[:2]
    states = {}
    for seq in model.states:
        value = initial.get(seq.name, initial.get(f"{seq.name}0"))
        value = np.zeros((B, size_of(seq.rows, sizes))) if value is None else np.asarray(value, np.float64)
        _bind(sizes, (BATCH, seq.rows), value.shape, f"the initial {seq.name}")
        states[seq.name] = torch.tensor(value[..., None], requires_grad=True)
    known = {seq.name for seq in model.states} | {f"{seq.name}0" for seq in model.states}
    if set(initial) - known:
        raise OracleError(f"initial has unknown keys {sorted(set(initial) - known)}; expected state names")
    return Problem(model, sizes, leaves, states, data, T, B)


def _data_references(model):
    """The targets and labels the loss and teacher forcing read (ys), sorted."""
    exprs = [model.concrete_loss(), *(value for _, value in model.teacher_forcing)]
    refs = {ref for expr in exprs for ref in expr.atoms(SeqAt) if ref.role in ("target", "label")}
    return sorted(refs, key=lambda ref: ref.name)


def _sequence_data(seq, array, sizes, what):
    """xs or ys as tensors: (T, B, rows, 1) of float64, or (T, B) int64 labels."""
    array = np.asarray(array)
    if seq.role == "label":
        _bind(sizes, (STEPS, BATCH), array.shape, what)
        return torch.tensor(array, dtype=torch.int64)
    _bind(sizes, (STEPS, BATCH, seq.rows), array.shape, what)
    return torch.tensor(array, dtype=DTYPE)[..., None]


def _bind(sizes, dims, shape, what):
    """Bind the size symbols of dims (h, 4*h, 1, STEPS) to shape's extents; OracleError if they clash.
    A vector parameter (rows, 1) comes as a 1-D array."""
    dims = tuple(dims[:1]) if len(shape) == 1 and len(dims) == 2 and dims[1] == 1 else tuple(dims)
    expected = []
    for dim, n in zip(dims, shape, strict=False):
        dim, size, multiple = _dim_form(dim)
        if size is not None:
            expected.append(multiple * sizes.setdefault(size, n // multiple))
        else:
            expected.append(dim.xreplace(sizes))
    if len(shape) != len(dims) or any(_known(e) and e != n for e, n in zip(expected, shape, strict=False)):
        raise OracleError(f"{what} has shape {tuple(shape)}; expected {tuple(expected)}")


@lru_cache(maxsize=1 << 10)
def _dim_form(dim):
    """(dim as SymPy, its size symbol and multiple if it is one (h or 4*h), else None and None)."""
    dim = sp.sympify(dim)
    (size, *others) = dim.free_symbols or {None}
    if size is not None and not others and (dim / size).is_Integer:
        return dim, size, int(dim / size)
    return dim, None, None


def _known(extent):
    """Whether an expected extent is a number (an int, or a SymPy Integer), not an unbound size."""
    return isinstance(extent, int) or extent.is_Integer


def compare(
    module,
    model,
    params,
    xs,
    ys,
    initial=None,
    truncate=None,
    tol=1e-12,
    forward_mode=False,
    expected=None,
    options=None,
):
    """Run a generated module's forward and loss_and_grads (NumPy, torch or JAX) and the oracle on the
    same batch; AssertionError naming the first output, loss or gradient that differs by more than tol,
    measured as max|a - b| / max(1, max|b|) with b the oracle's. forward_mode: forward_mode_grads too
    (real-time recurrent learning, full BPTT only), against the same oracle. expected: run()'s result for
    these arguments, when the caller has it already (several backends against one oracle run). options: more
    keyword arguments of the module's forward and loss_and_grads (torch's compile=True). Returns what the module's
    loss_and_grads returned, for the caller to compare other calls with."""
    if forward_mode and truncate is not None:
        raise OracleError(f"forward_mode_grads computes full BPTT only, not truncate={truncate!r}")
    if expected is None:
        expected = run(model, params, xs, ys, initial, truncate)
    to_framework, to_numpy = _framework(module)
    initial = initial or {}
    states = {f"{seq.name}0": initial.get(seq.name, initial.get(f"{seq.name}0")) for seq in model.states}
    states = {key: to_framework(value) for key, value in states.items() if value is not None}
    theirs = {name: to_framework(array) for name, array in params.items()}
    data = (to_framework(xs), to_framework(ys))
    options = options or {}
    outputs, _ = module.forward(theirs, *data[: 2 if model.teacher_forcing else 1], **states, **options)
    name = model.outputs[0][0].name
    _agree(f"output {name}", to_numpy(outputs), expected.outputs[name], tol)
    found = module.loss_and_grads(theirs, *data, **states, truncate=truncate, **options)
    _agree_gradients("", found, expected, to_numpy, tol)
    if forward_mode:
        _agree_gradients("forward mode: ", module.forward_mode_grads(theirs, *data, **states), expected, to_numpy, tol)
    return found


def _agree_gradients(what, loss_and_grads, expected, to_numpy, tol):
    """The loss and every gradient of (loss, grads) against the oracle's; `what` prefixes the messages."""
    loss, grads = loss_and_grads
    _agree(f"{what}loss", to_numpy(loss), expected.loss, tol)
    if set(grads) != set(expected.grads):
        raise AssertionError(f"{what}gradient keys {sorted(grads)}; the oracle's are {sorted(expected.grads)}")
    for key, value in expected.grads.items():
        _agree(f"{what}gradient {key}", to_numpy(grads[key]), value, tol)


def _framework(module):
    """(to the module's arrays, back to NumPy) for a NumPy, torch or JAX module."""
    if "jax" in vars(module):
        import jax

        from bptt.tests.support.jax_eager import on_device

        jax.config.update("jax_enable_x64", True)
        return on_device, np.asarray
    if "torch" in vars(module):
        return lambda array: torch.tensor(np.asarray(array)), lambda value: value.detach().cpu().numpy()
    return lambda array: np.array(array), np.asarray


def _agree(what, got, expected, tol):
    got, expected = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    if got.shape != expected.shape:
        raise AssertionError(f"{what}: shape {got.shape} from the module, {expected.shape} from the oracle")
    error = np.abs(got - expected).max(initial=0) / max(1.0, np.abs(expected).max(initial=0))
    if not error <= tol:
        raise AssertionError(
            f"{what} differs from the oracle by {error:.3e} (tol {tol:g}, relative to max(1, max|oracle|))\n"
            f"module: {np.array2string(got, precision=17)}\noracle: {np.array2string(expected, precision=17)}"
        )


def _run_sweeps(model, params, xs, ys, initial, truncate, grads=True, keep=None):
    """run() of a model with reverse-time states (oracle_sweeps.py), truncated as its docstring says."""
    if model.teacher_forcing:
        raise OracleError("the oracle runs reverse-time states without teacher forcing only")
    mode, k = _truncation(truncate, keep)
    problem = _problem(model, params, xs, ys, initial or {})
    outputs, losses = run_sweeps(problem, mode, k, keep)
    loss = _total(problem, losses)
    found = {}
    if grads:
        leaves = {**problem.params, **{f"{name}0": leaf for name, leaf in problem.initial.items()}}
        for (key, leaf), grad in zip(
            leaves.items(), torch.autograd.grad(loss, list(leaves.values()), allow_unused=True), strict=True
        ):
            grad = torch.zeros_like(leaf) if grad is None else grad
            found[key] = (
                grad.detach().reshape(np.shape(params[key]) if key in problem.params else leaf.shape[:-1]).numpy()
            )
    outputs = {name: torch.stack([step[name][..., 0] for step in outputs]).detach().numpy() for name in outputs[0]}
    return Result(outputs, float(loss.detach()), found)
