"""What a document needs from the derivation, derived once: the textbook derivation (intermediates
named by the textbook rule), the one with every intermediate substituted, the closed forms and the
gradient flow."""

from dataclasses import dataclass

from bptt.derive.bptt import derive
from bptt.derive.closed_form import NoClosedForm, block_closed_form, closed_form
from bptt.derive.direction import reverse_states
from bptt.derive.directional import directional_forms
from bptt.derive.flow import gradient_flow
from bptt.derive.norm_adjoint import compact


@dataclass(frozen=True, eq=False)  # hashed as itself: a document draws its graph once (graph_document)
class Derived:
    model: object
    textbook: object  # Derivation, named="textbook", each norm's adjoint collected (norm_adjoint.compact): printed
    substituted: object  # Derivation, named="none": what the closed forms and the flow are read from
    closed: dict  # a single state's Seq -> its ClosedForm, or the NoClosedForm saying why there is none
    block: object  # for several states: their BlockClosedForm, or the NoClosedForm saying why; else None
    flow: object  # the Flow, or the NoClosedForm saying why the flow is not read off the derivation
    directional: object = None  # with reverse-time states: {state: DirectionalForm}, or the NoClosedForm saying why

    @property
    def states(self):
        """The states the recursion runs through (teacher-forced ones are data)."""
        return tuple(self.textbook.states)


def derived(model):
    substituted = derive(model)
    if reverse_states(model):
        forms = _attempt(directional_forms, substituted)
        none = NoClosedForm("the gradient flow is read for forward states only")
        return Derived(model, compact(derive(model, named="textbook")), substituted, {}, None, none, forms)
    closed, block = {}, None
    if len(substituted.states) > 1:
        block = _attempt(block_closed_form, substituted)
    else:
        closed = {seq: _attempt(closed_form, substituted, seq) for seq in substituted.states}
    given = block if not isinstance(block, NoClosedForm) else None
    flow = _attempt(gradient_flow, model, substituted, given)
    return Derived(model, compact(derive(model, named="textbook")), substituted, closed, block, flow)


def _attempt(function, *args):
    try:
        return function(*args)
    except NoClosedForm as why:
        return why
