"""What a document says of a model's norms: how their adjoints are written (derive/norm_adjoint.py)."""

from bptt.derive.norm_adjoint import norms
from bptt.documents.prose import listed, maths

HAT, ONES, MU = r"\hat{\mathbf{v}}", r" - \frac{1}{n}\mathbf{1}\mathbf{1}^\top", r" - \mathbf{1}\mu"


def norm_text(model):
    """A sentence on the norms' adjoints, or "" for a model without norms."""
    found = norms(model)
    if not found:
        return ""
    hats = listed(maths(norm.hat()) for norm in found)
    centred = any(norm.mu is not None for norm in found)
    ones = ONES if centred else ""
    jacobian = rf"\frac{{1}}{{\sigma}}\left(\mathbf{{I}}{ones} - \frac{{1}}{{n}}{HAT}{HAT}^\top\right)"
    return (
        f" For each normalised vector ({hats}) of $n$ units, ${HAT} = (\\mathbf{{v}}{MU if centred else ''})/\\sigma$, "
        f"the chain rule through its mean, its deviation $\\sigma$ and ${HAT}$ collects into one product with the "
        f"Jacobian of the normalisation, $\\partial {HAT}/\\partial \\mathbf{{v}} = {jacobian}$, which is symmetric "
        f"(as $\\partial\\sigma/\\partial\\mathbf{{v}} = {HAT}^\\top/n$); the mean and the deviation need no adjoint "
        "of their own."
    )
