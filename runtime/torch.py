"""The torch backend's runtime: what a generated torch module runs besides its model's maths (truncation
weights, compile glue, the helpers its printed code calls; its argument checks: torch_checks.py). A model's
facts come in as its _Spec."""

import torch

from bptt.runtime.common import _check_g_max
from bptt.runtime.options import _Truncation


def clip_grads(grads, g_max):
    """Rescale grads by min(1, g_max / ||g||), ||g|| the global norm over all tensors (no host sync)."""
    g_max = _check_g_max(g_max)
    norm = torch.sqrt(sum(g.double().square().sum() for g in grads.values()))
    scale = torch.clamp(g_max / norm, max=1.0)  # g_max / 0 = inf: scale 1
    return {name: g * scale.to(g.dtype) for name, g in grads.items()}


def _truncation(truncate, rng):
    """The Truncation of a truncate argument (options.py), rng checked for random truncation."""
    truncation = _Truncation.of(truncate)
    if truncation.randomized:
        _check_rng(rng)
    return truncation


def _check_rng(rng):
    """rng for random truncation: a torch Generator, else ValueError."""
    if not isinstance(rng, torch.Generator):
        raise ValueError(f"truncate=('random', pi) needs rng=torch.Generator().manual_seed(seed), got rng={rng!r}")


def _keep_weights(truncation, T, rng, like):
    """keep[t]: the weight of the gradient flowing from step t+1 back into step t, t = 0..T-1, on like's
    device and in its dtype. random: T float64 uniforms drawn from rng (on its device), xi = (u < pi) / pi."""
    keep = torch.ones(T, dtype=like.dtype, device=like.device)
    k = pi = truncation.value
    if truncation.chunked:
        keep[k::k] = 0  # h_k, h_2k, ... enter the next step detached
    elif truncation.randomized:
        draws = torch.rand(T, generator=rng, dtype=torch.float64, device=rng.device)
        keep = ((draws < pi).double() / pi).to(like.device, like.dtype)  # xi_{t+1}: 0 or 1/pi
    return keep


def _flow_weights(keep, T):
    """keep[t] as Python numbers, what the flows from step t+1 are scaled by in place (alpha=), taken off
    the device once per call; all 1 without truncation (keep None)."""
    return [1.0] * (T + 1) if keep is None else keep.tolist()


def _check_compile(compile, checkpoints=None):
    """compile, a bool: True runs each step of the loops through torch.compile, which takes no checkpoints."""
    if not isinstance(compile, bool):
        raise ValueError(f"compile must be True or False, got {compile!r}")
    if compile and checkpoints is not None:
        raise ValueError(
            "compile=True does not combine with checkpoints (their segments run as written); give one of them"
        )
    return compile


_COMPILED = {}  # step function -> the same through torch.compile, made on first use


def _compiled(step):
    """step through torch.compile, made once per process (torch compiles it again for another dtype or shape);
    RuntimeError in one line where torch.compile is not available or cannot compile it (no C++ compiler)."""
    if step not in _COMPILED:
        if not callable(getattr(torch, "compile", None)):
            raise RuntimeError(
                f"compile=True needs torch.compile (torch 2.0 or later); this is torch {torch.__version__}"
            )
        try:
            compiled = torch.compile(step)
        except RuntimeError as error:  # a Python or platform torch.compile does not support
            raise RuntimeError(f"compile=True: torch.compile is not available: {_first_line(error)}") from None

        def run(*args):
            try:
                return compiled(*(_as_input(arg) for arg in args))
            except torch._dynamo.exc.BackendCompilerFailed as error:
                cause = getattr(error, "inner_exception", error)  # the compiler's own error
                why = f"{type(cause).__name__}: {_first_line(cause)}"
                raise RuntimeError(f"compile=True: torch.compile cannot compile {step.__name__}: {why}") from None

        _COMPILED[step] = run
    return _COMPILED[step]


_NUMBERS = {}  # a Python float -> the same as a 0-d float64 tensor, made once


def _as_input(arg):
    """A step's argument as torch.compile should see it: a Python float (the weight keep[t] of a flow: 1, 0 or
    1/pi) as a 0-d tensor, which torch.compile takes as an input (its value a float it would guard on, compiling
    the step again for each new value); anything else as it is."""
    if type(arg) is not float:
        return arg
    if arg not in _NUMBERS:
        if len(_NUMBERS) >= 64:  # a few weights a truncation gives; beyond, all are dropped
            _NUMBERS.clear()
        _NUMBERS[arg] = torch.tensor(arg, dtype=torch.float64)
    return _NUMBERS[arg]


def _first_line(error):
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def _weighted(keep, t, flow):
    """The gradient flowing back from step t+1, weighted by keep[t] when truncating."""
    return flow if keep is None else keep[t] * flow


def _age(flow):
    """The flow from step t+1 arrives one step older; the window drops the oldest age."""
    return torch.cat((torch.zeros_like(flow[:1]), flow[:-1]))


def _directions(v, rows):
    """M_dot v for every direction M_dot = E_ij of a (rows, cols) matrix, (i, j) row-major:
    shape (rows * cols, B, rows) for v of shape (B, cols)."""
    cols = v.shape[-1]
    eye = torch.eye(rows, dtype=v.dtype, device=v.device)
    out = eye[:, None, None, :] * torch.movedim(v, -1, 0)[None, ..., None]
    return out.reshape((rows * cols,) + v.shape[:-1] + (rows,))


def _transposed_directions(v, cols):
    """M_dot^T v for every direction M_dot = E_ij of a (rows, cols) matrix, (i, j) row-major:
    shape (rows * cols, B, cols) for v of shape (B, rows)."""
    rows = v.shape[-1]
    eye = torch.eye(cols, dtype=v.dtype, device=v.device)
    out = torch.movedim(v, -1, 0)[:, None, ..., None] * eye[None, :, None, :]
    return out.reshape((rows * cols,) + v.shape[:-1] + (cols,))


def _onehot(labels, classes, dtype, out=None):
    """One-hot rows of the labels, into out if given."""
    onehot = torch.nn.functional.one_hot(labels, classes).to(dtype)
    return onehot if out is None else out.copy_(onehot)


def _softmax(z, out=None):
    """softmax over the last axis, into out if given."""
    value = torch.softmax(z, -1)
    return value if out is None else out.copy_(value)


def _softmax_cross_entropy(s, y, count):
    """(sum_t -log softmax(s_t)[y_t] / count, its gradient (softmax(s_t) - onehot(y_t)) / count). count: a
    number, or a tensor of one per step and sample (T, B) (lengths=: inf at a padded step, which weighs nothing)."""
    picked = torch.gather(s, -1, y[..., None])[..., 0]
    grad = torch.softmax(s, -1) - torch.nn.functional.one_hot(y, s.shape[-1]).to(s.dtype)
    if isinstance(count, torch.Tensor):
        share = 1 / count
        return ((torch.logsumexp(s, -1) - picked) * share).sum(), grad * share[..., None]
    loss = (torch.logsumexp(s, -1) - picked).sum() / count
    return loss, grad / count


def _squared_error(s, y, count):
    """(sum_t 1/2 ||s_t - y_t||^2 / count, its gradient (s_t - y_t) / count); count as for _softmax_cross_entropy."""
    difference = s - y
    if isinstance(count, torch.Tensor):
        share = 1 / count
        return (0.5 * difference.square().sum(-1) * share).sum(), difference * share[..., None]
    loss = (0.5 * difference.square().sum(-1)).sum() / count  # l_t first: its rounding is that of losses()
    return loss, difference / count


def _norm_adjoint(g, hat, sigma, centred=True):
    """A norm's Jacobian times g (derive/norm_adjoint.py): (g - mean(g) - hat mean(hat * g)) / sigma, without mean(g)
    for an RMS norm (centred False); O(n) per row, no n x n matrix, the means over the last axis, kept."""
    centre = g.mean(dim=-1, keepdim=True) if centred else 0
    return (g - centre - hat * (hat * g).mean(dim=-1, keepdim=True)) / sigma


def _mean_into(v, count, out):
    """The mean over the last axis of v into out (a last axis of 1), count the units' count as a 0-d tensor
    (torch.mean, and a Python number as an operand, allocate at every call)."""
    torch.sum(v, dim=-1, keepdim=True, out=out)
    out.div_(count)


def _spread_into(v, mu, eps, rows, count, out):
    """A norm's sigma, mean((v - mu)^2 + eps)^(1/2) over the last axis, into out (a last axis of 1); mu None for
    an RMS norm's, eps (a 0-d tensor) None for 0; rows a scratch tensor of v's shape. Nothing allocated."""
    if mu is None:
        torch.square(v, out=rows)
    else:
        torch.sub(v, mu, out=rows)
        rows.square_()
    _mean_into(rows, count, out)
    if eps is not None:
        out.add_(eps)  # mean(x + eps) = mean(x) + eps: added once per row, not to every unit
    out.sqrt_()


def _normalised_into(v, mu, sigma, out):
    """A norm's v_hat, (v - mu) / sigma, into out; mu None for an RMS norm's. Nothing allocated."""
    if mu is None:
        torch.div(v, sigma, out=out)
    else:
        torch.sub(v, mu, out=out)
        out.div_(sigma)


def _product_into(first, second, *rest, out):
    """The elementwise product of the tensors into out, in their order. Nothing allocated."""
    torch.mul(first, second, out=out)
    for factor in rest:
        out.mul_(factor)


def _norm_adjoint_into(g, hat, sigma, rows, means, count, out, centred=True):
    """_norm_adjoint(g, hat, sigma, centred) into out, in the scratch tensors rows (g's shape) and means (a last
    axis of 1), count the units' count as a 0-d tensor (torch.mean allocates); nothing allocated. out may be g."""
    torch.mul(hat, g, out=rows)
    _mean_into(rows, count, means)
    torch.mul(hat, means, out=rows)  # hat mean(hat * g)
    if centred:
        _mean_into(g, count, means)
        rows.add_(means)
    torch.sub(g, rows, out=out)
    out.div_(sigma)


def _placed(like, *blocks):
    """The gradient of a parameter read by blocks (of a sequence's value read by row slices): zero, each (index,
    value) block added in at its index; a value with leading axes its block lacks (an aged adjoint's ages)
    widens the result to them."""
    out = torch.zeros_like(like)
    for index, value in blocks:
        extra = value.dim() - out[index].dim()
        if extra > 0:
            out = out.expand(*value.shape[:extra], *out.shape).clone()
        out[index] += value
    return out


def _scatter_columns(values, labels, columns):
    """sum_t values_t onehot(labels_t)^T: each row of values added into column labels of the result."""
    rows = values.reshape(-1, values.shape[-1])
    out = rows.new_zeros((columns, rows.shape[1]))
    out.index_add_(0, labels.reshape(-1), rows)
    return out.T


_LOSS_PART = 2**20  # bytes of the outputs whose loss and gradient _Loss computes at once


def _loss_parts(outputs):
    """Slices of consecutive steps of the outputs, of about _LOSS_PART bytes each (at least one step)."""
    T = outputs.shape[0]
    steps = max(1, _LOSS_PART // max(1, outputs[:1].nbytes))
    return [slice(start, min(start + steps, T)) for start in range(0, T, steps)] or [slice(0, 0)]
