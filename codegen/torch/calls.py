"""torch's calls for the in-place statement printer (printing/array_calls.py's table), for the torch module's
passes run under torch.no_grad(), so they may write into its tensors.

torch differs where a table entry differs: `torch.sub` takes no Python number first (c - x is
-x + c), `out.copy_(x)` for np.copyto, `dim=` for `axis=`, and every tensor it allocates takes
the dtype AND the device of the inputs.
"""

from bptt.codegen.printing.array_calls import ArrayCalls

TORCH_OUT = frozenset(("abs", "exp", "expm1", "log", "neg", "sigmoid", "sqrt", "square", "tanh"))

TORCH = ArrayCalls(
    module="torch",
    add="torch.add({a}, {b}, out={out})",
    subtract="torch.sub({a}, {b}, out={out})",
    multiply="torch.mul({a}, {b}, out={out})",
    matmul="torch.matmul({a}, {b}, out={out})",
    step_matmul="torch.matmul({a}, {b}, out={out})",
    minus_from=("torch.neg({x}, out={out})", "{out}.add_({c})"),
    negative="torch.neg({x}, out={out})",
    square="torch.square({x}, out={out})",
    sqrt="torch.sqrt({x}, out={out})",
    power="torch.pow({x}, {p}, out={out})",
    copy="{out}.copy_({x})",
    zero="{out}.zero_()",
    concatenate="torch.cat(({parts}), out={out})",
    concatenate_columns="torch.cat(({parts}), dim=1, out={out})",
    empty="torch.empty({shape}, dtype=dtype, device=device)",
    ones="torch.ones({shape}, dtype=dtype, device=device)",
    takes_out=TORCH_OUT.__contains__,
)
