"""A derivation as a document: sections of equations, each display after the sentence that says where
it comes from. Equations are LaTeX, long ones broken into lines that fit the page; render.py lays the
sections out as a .tex or .md file."""

from dataclasses import replace

from bptt.derive.bptt import ACROSS, SAME
from bptt.derive.direction import initial_time, is_reverse, reverse_states
from bptt.derive.nodes import Adj, SeqAt, t
from bptt.derive.refusal import refusing
from bptt.derive.written import as_written
from bptt.documents.block_document import block_section
from bptt.documents.checkpoint_document import checkpoint_section
from bptt.documents.closed_document import closed_form_sections, truncation_section
from bptt.documents.derived import derived
from bptt.documents.direction_document import direction_sections
from bptt.documents.equation import Equation, Section, displays, equation
from bptt.documents.flow_document import flow_section
from bptt.documents.forward_document import forward_mode_sections
from bptt.documents.graph_document import graph_section
from bptt.documents.latex import latex
from bptt.documents.norm_document import norm_text
from bptt.documents.parameter_document import param_section
from bptt.documents.prose import DEFINITIONS, listed, maths, through
from bptt.documents.source_document import compared, source_section

LOSS = r"\ell_{t}"  # the loss of step t; L is their sum (or mean)

# Every section a document may have, in order: what `bptt latex --sections` takes.
NAMES = (
    "model",
    "graph",
    "outputs",
    "intermediates",
    "forcing",
    "backward",
    "parameters",
    "closed-form",
    "truncation",
    "checkpoints",
    "flow",
    "forward",
    "lemma",
    "source",
)


FORWARD_ONLY = ("truncation", "checkpoints", "flow", "forward", "lemma")


class UnknownSection(ValueError):
    """A section name the document of a model does not have; the message lists those it has."""


def available(model):
    """The names of the sections a model's document has, in order (for a model with reverse-time states,
    the derivation and its closed forms: truncation, bounded memory, the flow and forward mode are forward
    states' only)."""
    live = [s for s in model.states if s not in model.forced]
    missing = {"intermediates": not model.intermediates, "forcing": not model.teacher_forcing}
    missing["source"] = not compared(model)
    missing |= {name: not live for name in ("backward", "closed-form", "truncation", "checkpoints", "lemma")}
    if reverse_states(model):
        missing |= dict.fromkeys(FORWARD_ONLY, True)
    return tuple(name for name in NAMES if not missing.get(name))


def sections(model, only=None):
    """The sections of the derivation of BPTT for a model; `only`: the names of some of them (in any order)."""
    names = available(model)
    wanted = names if only is None else tuple(dict.fromkeys(only))
    unknown = [name for name in wanted if name not in names]
    if unknown:
        raise UnknownSection(
            f"no section {', '.join(map(repr, unknown))} in the document of {model.name}; "
            f"its sections are {', '.join(names)}"
        )
    built = {}
    with refusing(model):
        facts = derived(model)
        for name in names:
            if name in wanted or name in ("forward", "lemma") and {"forward", "lemma"} & set(wanted):
                built.update((s.name, s) for s in _build(name, facts))
    return _defined([built[name] for name in names if name in wanted and name in built])


def _build(name, facts):
    """The section(s) of a name: one, or the forward-mode section and the lemma together."""
    model, textbook = facts.model, facts.textbook
    builders = {
        "model": lambda: [model_section(model)],
        "graph": lambda: [graph_section(facts)],
        "outputs": lambda: [_output_section(model, textbook)],
        "intermediates": lambda: [_intermediate_section(model, textbook)],
        "forcing": lambda: [_forcing_section(model, textbook)],
        "backward": lambda: [_state_section(textbook)],
        "parameters": lambda: [param_section(model, textbook)],
        "closed-form": lambda: _closed_form_sections(facts),
        "truncation": lambda: [truncation_section(facts)],
        "checkpoints": lambda: [checkpoint_section(model)],
        "flow": lambda: [flow_section(facts)],
        "forward": lambda: forward_mode_sections(facts),
        "lemma": lambda: [],
        "source": lambda: [source_section(model)],
    }
    return builders[name]()


def _closed_form_sections(facts):
    if facts.directional is not None:
        return direction_sections(facts)
    return [block_section(facts)] if facts.block is not None else closed_form_sections(facts)


def _defined(chosen):
    """The sections with each term of DEFINITIONS defined where it is first used."""
    out, done = [], set()
    for section in chosen:
        new = [term for term in section.uses if term not in done]
        if new:
            section = replace(section, text=" ".join((*(DEFINITIONS[term] for term in new), section.text)).strip())
            done |= set(new)
        out.append(section)
    return out


def _named(model, expr):
    """Replace defining expressions by their names: softmax(s_t) -> o_t."""
    for seq, definition in model.names:
        expr = expr.replace(
            lambda e, d=definition: _shift_of(d, e) is not None, lambda e, s=seq, d=definition: s(t + _shift_of(d, e))
        )
    return expr


def _shift_of(definition, expr):
    if type(expr) is not type(definition):
        return None
    times = [a.time for a in expr.atoms(SeqAt)]
    if not times:
        return None
    shift = times[0] - t
    return shift if definition.subs(t, t + shift) == expr else None


def model_section(model):
    weight = r"\frac{1}{T} " if model.mean else ""
    equations = [equation(latex(seq()), as_written(rhs, model.written)) for seq, rhs in model.assignments]
    equations.append(Equation(LOSS, latex(model.loss), ""))
    equations.append(Equation("L", rf"{weight}\sum_{{t=1}}^{{T}} {LOSS}", ""))
    for seq, definition in model.names:
        equations.append(equation(latex(seq()), definition))
    initial = listed(f"${latex(s(initial_time(model, s)))}$" for s in model.states)
    params = listed(maths(p) for p in model.params)
    text = (
        f"One step of the cell at time $t = 1, \\ldots, T$, from the given initial {initial}; "
        f"$\\theta$ stands for all the parameters, {params}. Bold lower-case letters are column vectors and bold "
        "capitals matrices; $\\odot$ is the elementwise product, $\\operatorname{diag}(\\mathbf{v})$ the diagonal "
        "matrix of $\\mathbf{v}$, $\\mathbf{1}$ a vector of ones, and a function of a vector applies to each entry."
    )
    names = [f"${latex(seq())}$ names ${latex(definition)}$" for seq, definition in model.names]
    text = " ".join((text, *(f"{listed(names).capitalize()}." for _ in names[:1]), *model.notes))
    closing = f" The step, its loss ${LOSS}$ and the loss $L$ of the sequence:"
    return Section("model", "The model", text + closing, displays(equations))


def _output_section(model, derivation):
    weight = r"$\frac{1}{T}$ times " if model.mean else ""
    equations = [
        equation(
            latex(Adj(seq())),
            _named(model, value),
            f"Only the loss of step $t$, ${LOSS}$, reads ${latex(seq())}$, so its adjoint is {weight}the derivative "
            f"of ${LOSS} = {latex(model.loss)}$, {model.loss.derivative_in_words}:",
        )
        for seq, value in derivation.output_adjoints.items()
    ]
    return Section("outputs", "Gradient of the loss with respect to the outputs", "", displays(equations), ("adjoint",))


def _intermediate_section(model, derivation):
    shown = [seq for seq in model.intermediates if seq in derivation.intermediates]  # a norm's mean and deviation
    equations = [equation(latex(Adj(seq())), derivation.intermediate(seq)) for seq in reversed(shown)]
    named = [maths(seq()) for seq in shown if seq in derivation.named]
    substituted = [maths(seq()) for seq in shown if seq not in derivation.named]
    if not substituted:
        kept = "Each keeps its name in the sections below."
    elif not named:
        kept = f"The sections below write the adjoints of {listed(substituted)} out in full where they are used."
    else:
        kept = (
            f"The sections below write the adjoints of {listed(substituted)} out in full where they are used, and "
            f"use those of {listed(named)} by name."
        )
    text = (
        f"{kept}{norm_text(model)} The adjoint of each intermediate value follows by the chain rule through the "
        "equations of the step that read it, from the step's last equation back to its first:"
    )
    return Section("intermediates", "Intermediate adjoints", text, displays(equations), ("adjoint",))


def _state_section(derivation):
    model, equations = derivation.model, []
    for seq in _readers_last(derivation):
        same = [c for c in derivation.states[seq] if c.when == SAME]
        across = [c for c in derivation.states[seq] if c.when in ACROSS]
        last, start = derivation.last(seq), initial_time(model, seq)
        at_end = through(same, last, model.written) or "nothing"
        readers = through(derivation.states[seq], t, model.written)
        reverse = is_reverse(model, seq)
        equations += [
            equation(
                latex(Adj(seq(last))),
                derivation.terminal(seq),
                f"At the {'first' if reverse else 'last'} step only {at_end} reads ${latex(seq(last))}$:",
            ),
            equation(
                latex(Adj(seq())),
                derivation.recursion(seq),
                f"For ${'t > 1' if reverse else 't < T'}$, by the chain rule through {readers}:",
            ),
            equation(
                latex(Adj(seq(start))),
                derivation.initial(seq),
                f"The initial state is read by step {'$T$' if reverse else '1'} only, through "
                f"{through(across, start, model.written)}:",
            ),
        ]
    return Section(
        "backward", "Backpropagation through time: the state adjoints", _order(model), displays(equations), ("adjoint",)
    )


def _readers_last(derivation):
    """The states in an order in which each state's adjoint at the last step is shown after the adjoints of the
    other states it reads at that step (the LSTM's dL/dc_T reads dL/dh_T), in the derivation's order otherwise."""
    states = list(derivation.states)
    names = {seq.name for seq in states}
    reads = {seq: {a.of.name for a in derivation.terminal(seq).atoms(Adj)} & names - {seq.name} for seq in states}
    ordered = []
    while states:
        ready = next((s for s in states if reads[s] <= {o.name for o in ordered}), states[0])
        ordered.append(ready)
        states.remove(ready)
    return ordered


def _order(model):
    """The order the state adjoints are computed in: back in time, and forward in time for reverse-time states."""
    reverse = reverse_states(model)
    if not reverse:
        return "Computed from $t = T$ down to $t = 0$."
    forward = [maths(s()) for s in model.states if s not in reverse]
    later = [maths(s()) for s in reverse]
    parts = [f"The adjoints of the forward states ({listed(forward)}) are computed from $t = T$ down to $t = 0$."]
    parts = parts if forward else []
    one = len(later) == 1
    parts.append(
        f"{'A reverse-time state' if one else 'Reverse-time states'} ({listed(later)}) "
        f"{'is' if one else 'are'} read by the step before, so {'its adjoint runs' if one else 'their adjoints run'} "
        "forward in time: from $t = 1$, where nothing earlier reads them, up to the initial value at $t = T + 1$."
    )
    return " ".join(parts)


def _forcing_section(model, derivation):
    parts, equations = [], []
    for seq, replacement in model.teacher_forcing:
        cut = [c for c in derivation.forced[seq] if c.when in ACROSS]
        value, data = maths(seq()), maths(replacement)
        parts.append(
            f"Free-running, step $t+1$ would read {value} through {through(cut, t, model.written)}, and the gradient "
            "would flow back "
            f"through it to step $t$. Under teacher forcing step $t+1$ reads {data} instead: "
            f"{value} is data, nothing flows into it, and the term is cut. Below, {value} for $t \\ge 1$ stands for "
            f"{data}, its value in training."
        )
        equations.append(
            equation(
                latex(Adj(seq(0))),
                derivation.initial(seq),
                f"The given initial ${latex(seq(0))}$ is still read by step 1, through "
                f"{through(cut, 0, model.written)}:",
            )
        )
    if derivation.states:
        rest = listed(maths(s()) for s in derivation.states)
        parts.append(f"Backpropagation through time runs through {rest} only.")
    else:
        parts.append(
            "Every read of the past is now data: the Jacobian of step $t+1$ with respect to step $t$ is zero, "
            "no gradient flows back through time, and each gradient below is a plain sum over $t$ of per-step terms."
        )
    return Section("forcing", "Teacher forcing", " ".join(parts), displays(equations), ("adjoint",))
