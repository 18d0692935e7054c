"""The derivation's section on BPTT in bounded memory: what one backward step reads (the values in its
adjoints and parameter gradients, as the generated code stores them), what a checkpoint must hold (the
states: every later value is recomputed from them), and the cost of the optimal schedule."""

import sympy as sp

from bptt.derive.bptt import derive
from bptt.derive.nodes import t, values
from bptt.documents.equation import Equation, Section, displays
from bptt.documents.latex import latex
from bptt.documents.prose import listed, maths

COST = r"\min_{1 \le y < t} \left( y + Q(t - y, m - 1) + Q(y, m) \right)"  # Q(t, m), for t > m > 1


def backward_reads(model):
    """The sequence values one backward step t reads, at the times it reads them (the derivation with
    every intermediate adjoint named, as codegen derives it), sorted. A value of step t+1 is read by step t+1,
    which sends its flow back already multiplied by it: whether the cell names its pre-activation (elman's a_t)
    or not (elman-onehot's), the same cell reads the same values."""
    derivation = derive(model, named="all", loss=model.concrete_loss())
    exprs = list(derivation.output_adjoints.values())
    exprs += [derivation.recursion(seq) for seq in derivation.states]
    exprs += [derivation.intermediate(seq) for seq in derivation.intermediates]
    exprs += [derivation.param_gradient(p) for p in model.params]
    found = set().union(*(values(expr) for expr in exprs))
    stepped = {seq for seq in found if seq.time.has(t) and not (seq.time - t).is_positive}
    return sorted(stepped, key=lambda seq: (str(seq.time - t), seq.role != "state", seq.name))


def checkpoint_section(model):
    """The section: reads, checkpoint, recomputed values and the schedule's cost."""
    data = {seq.name for seq in (*model.inputs, *model.forced)} | {model.concrete_loss().target.name}
    stored = [seq for seq in backward_reads(model) if seq.name not in data]
    states = [seq for seq in model.states if seq not in model.forced]  # a teacher-forced state is data
    several = len(states) > 1
    recomputed = [seq for seq in stored if seq.role != "state" and seq.time == t]
    rows = sp.Add(*[seq.rows for seq in states])
    text = (
        f"One backward step $t$ reads {listed(maths(seq) for seq in stored)}, besides the data and the "
        "flow back from step $t+1$, which that step has multiplied by its own values. A checkpoint must hold "
        f"the state{'s' * several} "
        f"{listed(maths(seq()) for seq in states)} alone, ${latex(rows)}$ entries per sample: from "
        f"{'them' if several else 'it'} the forward pass recomputes every later value"
    )
    if recomputed:
        before = listed(maths(seq(t - 1)) for seq in states)
        text += f" (each step's {listed(maths(seq) for seq in recomputed)} from {before}, with the step's input)"
    text += (
        ". With $m$ memory slots, each a kept state or one stored step, the schedule that recomputes least "
        "takes $Q(T, m)$ step evaluations, the first forward pass included (Gruslys et al. 2016): $Q(t, m) = t$ "
        "for $t \\le m$ (every step stored), $Q(t, 1) = t (t + 1) / 2$, and for $t > m > 1$ the best split. A "
        "memory budget in bytes weighs a kept state against a stored step by their sizes."
    )
    why = (
        "The split advances $y$ steps and keeps that state, then runs the last $t - y$ steps with one slot "
        "fewer, then the first $y$ again:"
    )
    return Section("checkpoints", "Backpropagation in bounded memory", text, displays([Equation("Q(t, m)", COST, why)]))
