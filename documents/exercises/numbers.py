"""Exact values as LaTeX: a fraction as \\tfrac, a vector or matrix as a pmatrix, a 1 x 1 matrix as its entry."""

import sympy as sp


def number(value):
    """A rational (or an exact scalar) as LaTeX: 3, -\\tfrac{3}{4}."""
    value = sp.nsimplify(value)
    if value.is_Rational and value.q != 1:
        sign = "-" if value < 0 else ""
        return rf"{sign}\tfrac{{{abs(value.p)}}}{{{value.q}}}"
    return sp.latex(value)


def matrix(value):
    """An explicit matrix: its entry when 1 x 1, else a pmatrix (a row vector of a column's transpose kept)."""
    if not isinstance(value, sp.MatrixBase):
        return number(value)
    if value.shape == (1, 1):
        return number(value[0, 0])
    rows = [" & ".join(number(entry) for entry in value.row(r)) for r in range(value.rows)]
    return r"\begin{pmatrix}" + r" \\ ".join(rows) + r"\end{pmatrix}"


def total(terms):
    """The values of a sum's terms, summed as the sum is written: (negated, value) pairs, a negated term
    subtracted as the value of what it negates, a negative number subtracted."""
    pieces = []
    for n, (negated, value) in enumerate(terms):
        text = matrix(-value if negated else value)
        if negated:
            pieces.append(f"- {_wrapped(text)}")
        elif n and text.startswith("-"):
            pieces.append(f"- {text[1:]}")
        else:
            pieces.append(f"+ {text}" if n else text)
    return " ".join(pieces)


def _wrapped(text):
    return rf"\left({text}\right)" if text.startswith("-") else text
