"""The names a model cannot give (its other names win over the generated code's own: codegen/namer.py):
the public API's words (and X0 beside a state X: its initial value's keyword and key), and for the torch
backend a parameter named as an nn.Module attribute.
`bptt codegen` refuses them (ModelError, exit 2) in one line naming the name and why.

tests/codegen/test_names.py checks API against the public names and arguments of every generated module,
so the list cannot fall behind the templates.
"""

import re

from bptt.derive.model import ModelError

# A generated module is rendered from a hidden copy of its model, each name wrapped in MARKER (`W` is `QzqWQzq`),
# so that codegen/namer.py can tell the model's names, and those made from them, from the code's own.
MARKER = "Qzq"
HIDDEN = re.compile(f"{MARKER}((?:(?!{MARKER}).)*){MARKER}")


def hidden_name(name):
    return f"{MARKER}{name}{MARKER}"


def shown(text):
    """text with each hidden name shown as the model gives it (what a name's length is measured on)."""
    if MARKER not in text:
        return text
    if all(line.count(MARKER) % 2 == 0 for line in text.split("\n")):
        return text.replace(MARKER, "")  # HIDDEN pairs a line's markers in order: it takes every one of them
    return HIDDEN.sub(_inside, text)


def _inside(match):
    return match[1]  # faster than the template r"\1", which re expands in Python for each match


# The public API of the generated modules, as the README lists it: what a user writes by name. A model's
# parameter or sequence may take none of them; a size (only ever a keyword argument) none of API_ARGUMENTS.
API_FUNCTIONS = frozenset(
    """
    BPTT CACHE CheckpointedBPTT CompiledBPTT MEAN Model PARAMS SHAPES SIZES STATES TEACHER_FORCED XS_REQUIRES_GRAD
    apply backward clip_grads forward forward_mode_grads free_workspace init_params loss loss_and_grads losses
    random_inputs
    """.split()
)
API_ARGUMENTS = frozenset(
    """
    B T at cache check_finite checkpoints compile d_outputs device dtype g_max grads init_rng lengths outputs params
    rng truncate xs ys
    """.split()
)
API = API_FUNCTIONS | API_ARGUMENTS

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


def check(model):
    """Raise ModelError naming the first of the model's names that a generated module cannot give way to:
    the API's own words, a torch Model's attributes for a parameter, and names holding MARKER. (Keywords,
    names starting with _, duplicates and NFKC-equal pairs: derive/model.py refuses them.)"""
    where = f"model {model.name!r}"
    named = [("the size", size.name, API_ARGUMENTS) for size in model.sizes]
    named += [("the parameter", param.name, API) for param in model.params]
    named += [(f"the {seq.role}", seq.name, API) for seq in model.sequences()]
    for what, name, api in named:
        if name in api:
            raise ModelError(
                f"{where}: {what} {name!r} is a word of the generated modules' API (their functions and arguments, "
                "bptt.codegen.names.API); rename it"
            )
        if MARKER in name:
            raise ModelError(f"{where}: {what} {name!r} holds {MARKER!r}, which codegen hides the model's names with")
    for state in model.states:  # X0 is the initial state's keyword of forward, and its gradient's key
        initial = next((what for what, name, _ in named[len(model.sizes) :] if name == f"{state.name}0"), None)
        if initial:
            raise ModelError(
                f"{where}: {initial} {state.name + '0'!r} is the name of the initial value of the state "
                f"{state.name!r} (forward's keyword, its gradient's key); rename it"
            )
    for param in model.params:
        if param.name in MODULE_ATTRIBUTES:
            raise ModelError(
                f"{where}: the parameter {param.name!r} would hide the attribute {param.name!r} of the torch "
                "backend's Model (an nn.Module); rename the parameter"
            )
