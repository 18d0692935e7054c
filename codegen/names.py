"""The names a generated module takes for itself, and those it makes from a model's: a model must leave
them free, in every backend, or `bptt codegen` refuses it (ModelError, exit 2) naming the clash.

tests/codegen/test_names.py parses the generated modules of every backend and checks that each name they bind
(at module level or in a function body they print) is listed here or made from the model's names by
a pattern below, so the lists cannot fall behind the templates. Names starting with `_` are the
generated code's and never a model's (derive/model.py refuses them).
"""

from bptt.derive.model import ModelError

# Bound by some backend's module: module-level constants, functions and classes, the arguments and
# locals of the functions it prints (a helper's own locals never meet a model's names).
FIXED = frozenset(
    """
    B BPTT CACHE MEAN Model PARAMS SHAPES SIZES STATES T TEACHER_FORCED XS_REQUIRES_GRAD adjoints ages apply
    append backward cache carry check_finite clip_grads ctx d_outputs device dim dims directions draws dtype first forward
    forward_mode_grads free_workspace given grads init_params init_rng initial inputs k keep keep_0 keep_next
    keep_t key loss loss_and_grads losses mode name named outputs params random_inputs residuals rng scale
    self shape shares sizes states t total truncate value where work x_key xs y_key ys zero
    CheckpointedBPTT after checkpoints following handed how itemsize kept like parts targets CompiledBPTT compile
    """.split()
)
# The frameworks and standard modules the backends import (or may), and the builtins their printed code calls.
MODULES = frozenset("np numpy torch jax jnp lax math functools itertools numbers threading".split())
BUILTINS = frozenset("ValueError dict getattr int len range slice staticmethod super tuple zip".split())
RESERVED = FIXED | MODULES | BUILTINS

# The torch backend's Model is an nn.Module whose attributes are the parameters: a parameter must not
# take the name of one of nn.Module's own attributes (or Model's: forward, loss, params, rng, truncate).
MODULE_ATTRIBUTES = frozenset(
    """
    T_destination add_module apply bfloat16 buffers call_super_init children compile cpu cuda double
    dump_patches eval extra_repr float forward get_buffer get_extra_state get_parameter get_submodule half ipu
    load_state_dict loss modules mtia named_buffers named_children named_modules named_parameters parameters
    params register_backward_hook register_buffer register_forward_hook register_forward_pre_hook
    register_full_backward_hook register_full_backward_pre_hook register_load_state_dict_post_hook
    register_load_state_dict_pre_hook register_module register_parameter register_state_dict_post_hook
    register_state_dict_pre_hook requires_grad_ rng set_extra_state set_submodule share_memory state_dict to
    to_empty train training truncate type xpu zero_grad checkpoints compile_steps
    """.split()
)

# What the code makes of a model's names: for each kind of name, the patterns ({} the name).
MADE = {
    "sequence": (
        "d_{}", "dot_{}", "{}_t", "{}_prev", "{}_next", "{}_steps", "d_{}_t", "d_{}_prev", "d_{}_next", "d_{}_steps", "d_{}_1"
    ),
    "step": ("{}_in",),  # a sequence assigned by a step: its input projection
    # the initial state, its gradient, its tangent saved a step (ir.Previous), its directions' rows in forward mode
    "state": ("{}0", "d_{}0", "dot_{}_prev", "along_{}0"),
    "parameter": ("d_{}", "dot_{}", "along_{}"),  # along_W: the rows of W's directions in forward mode
    "size": ("n_{}", "units_n_{}", "zero_n_{}"),
}
PREFIXES = ("units_",)  # units_n_h, units_4h, ...: forward mode's directions of a vector of any row count (ir.units_name)


def _named(model):
    """(what it is, its name, whether the code's functions use the name itself, the patterns of the names the
    code makes from it) for every sequence, parameter and size (a size's own name is only a keyword argument)."""
    steps = {seq.name for seq, _ in model.steps}
    for seq in model.sequences():
        patterns = MADE["sequence"] + (MADE["step"] if seq.name in steps else ())
        yield f"the {seq.role}", seq.name, True, patterns + (MADE["state"] if seq.role == "state" else ())
    for param in model.params:
        yield "the parameter", param.name, True, MADE["parameter"]
    for size in model.sizes:
        yield "the size", size.name, False, MADE["size"]


def code_names(model):
    """{name in the generated code's functions: [what it is]} for the model's names and those made from them."""
    made = {}
    for what, name, itself, patterns in _named(model):
        if itself:
            made.setdefault(name, []).append(f"{what} {name!r}")
        for pattern in patterns:
            code = pattern.format(name)
            made.setdefault(code, []).append(f"{code!r}, the code's {pattern.format('X')} for {what} X = {name!r}")
    return made


def check(model):
    """Raise ModelError naming the first of the model's names that the generated code cannot use."""
    where = f"model {model.name!r}"
    for size in model.sizes:
        if size.name in RESERVED:
            raise ModelError(f"{where}: the size {size.name!r} {_taken(size.name)}")
    for param in model.params:
        if param.name in MODULE_ATTRIBUTES:
            raise ModelError(
                f"{where}: the parameter {param.name!r} would hide the attribute {param.name!r} of the torch "
                "backend's Model (an nn.Module); rename the parameter"
            )
    for what, name, itself, _ in _named(model):
        if itself and name.startswith(PREFIXES):
            raise ModelError(f"{where}: {what} {name!r} {_taken(name)}")
    for name, meanings in code_names(model).items():
        if name in RESERVED:
            raise ModelError(f"{where}: {meanings[0]} {_taken(name)}")
        if len(meanings) > 1:
            raise ModelError(f"{where}: {' and '.join(meanings)} would be the same variable; rename one")


def _taken(name):
    what = "a builtin" if name in BUILTINS else "a module" if name in MODULES else "a name"
    return f"is {what} the generated code uses itself; rename it (bptt.codegen.names.RESERVED lists them all)"
