"""Sentences the sections share: lists of names, the equations a value flows through, defined terms."""

from bptt.derive.nodes import t
from bptt.derive.written import as_written
from bptt.documents.latex import latex
from bptt.documents.linebreak import PAGE
from bptt.documents.width import width

INLINE = 0.5 * PAGE  # the widest formula written inside a sentence: TeX cannot break inside its parentheses

# Terms a section may use, defined in the first section of a document that uses them.
DEFINITIONS = {
    "adjoint": (
        "The adjoint of a value $v$ is $\\partial L / \\partial v$, the gradient of the loss with respect to it, "
        "of the shape of $v$. Backpropagation computes the adjoints from the loss back to the inputs, each from "
        "the adjoints of the values that read it (the chain rule)."
    ),
}


def past_unread(model):
    """Why no gradient flows back through time, in words: the past is read as data (teacher forcing), or only
    through a flat function, or both."""
    ways = ["as data, which teacher forcing puts in place of the value the step before computed"]
    ways = ways if model.teacher_forcing else []
    if any(seq not in model.forced for seq in model.states):
        ways.append("through a flat function, one whose derivative is zero wherever it is defined (a step function)")
    return f"No step reads an earlier state but {listed(ways, 'or')}"


def reason(error):
    """Why a closed form or a flow is not shown, in words (the message of one that shows expressions is not)."""
    return getattr(error, "in_words", str(error))


def listed(items, word="and"):
    """`a`, `a and b`, `a, b and c`."""
    items = list(items)
    if len(items) < 2:
        return "".join(items)
    return ", ".join(items[:-1]) + f" {word} " + items[-1]


def maths(expr):
    return f"${latex(expr)}$"


def _equation_at(contribution, time, written):
    """The LaTeX of a consumer's equation at a time, as written: the model's equation (at t) shifted."""
    shift = contribution.through.time - t  # the consumer's step: t, t+1 or t-1
    return latex(as_written(contribution.rhs.subs(t, t - shift), written).subs(t, time + shift))


def through(contributions, time=t, written=()):
    """The consumer equations of some contributions at a time step, as the model's author wrote them (written:
    Model.written): written out when each is short enough to set inside a sentence and together they take at
    most a line of text, otherwise named ("the equations of ...") to keep the sentence short."""
    consumers = dict.fromkeys((latex(c.through.subs(t, time)), _equation_at(c, time, written)) for c in contributions)
    shown = [f"{lhs} = {rhs}" for lhs, rhs in consumers]
    if all(width(eq) <= INLINE for eq in shown) and sum(map(width, shown)) <= PAGE:
        return "; ".join(f"${eq}$" for eq in shown)
    names = [f"${lhs}$" for lhs, _ in consumers]
    return f"the equation{'s' if len(names) > 1 else ''} of {listed(names)}"
