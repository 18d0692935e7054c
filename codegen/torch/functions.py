"""The torch backend's code for the elementwise functions (as printing/functions.py's for NumPy): NumPy's
entries on torch where torch has the same functions, torch's own where it differs (no heaviside, clamp
for minimum, relu, logaddexp of two tensors).

A function of your own gets its torch code here: TORCH_FUNCTIONS.register("mish", lambda torch, x: ...).
"""

from bptt.codegen.printing.function_code import FunctionTable, Library
from bptt.codegen.printing.functions import ENTRIES
from bptt.derive.reductions import reduction_kind

SAME_AS_NUMPY = ("identity", "tanh", "sigmoid", "exp", "log", "softsign'", "softsign", "silu", "gelu'", "gelu", "power")

OWN = {
    "step": lambda torch, x: (x > 0).to(x.dtype),
    "relu": lambda torch, x: torch.relu(x),
    "softplus": lambda torch, x: torch.logaddexp(x, torch.zeros_like(x)),
    "elu'": lambda torch, x: torch.where(x > 0, 1, torch.exp(torch.clamp(x, max=0))),
    "elu": lambda torch, x: torch.where(x > 0, x, torch.expm1(torch.clamp(x, max=0))),
    "leaky_relu'": lambda torch, x, slope: float(slope) + float(1 - slope) * (x > 0).to(x.dtype),
    "leaky_relu": lambda torch, x, slope: torch.maximum(x, float(slope) * x),
    reduction_kind("mean"): lambda torch, x: x.mean(dim=-1, keepdim=True),
    reduction_kind("sum"): lambda torch, x: x.sum(dim=-1, keepdim=True),
}

TORCH_FUNCTIONS = FunctionTable(
    "bptt.codegen.torch.functions.TORCH_FUNCTIONS",
    Library("torch"),
    {name: ENTRIES[name] for name in SAME_AS_NUMPY} | OWN,
)
