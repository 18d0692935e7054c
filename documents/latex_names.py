"""A name as LaTeX: bold letters, a layer's superscript, an accent, a subscript in upright letters, a time
index as textbooks write it (`t+1`, `T+t-i`)."""

import sympy as sp
from sympy.printing.latex import greek_letters_set

from bptt.derive.norms import STATISTICS
from bptt.documents.text import code_point, greek

# Order of symbols inside a time index: T + t - i, not -i + t + T.
_TIME_ORDER = {"T": 0, "t": 1, "j": 2, "k": 3, "i": 4, "tau": 5}
_GREEK = {"tau": r"\tau"}


def time_index(expr):
    """`t+1`, `t-1`, `T+t-i`: a time index as textbooks write it."""
    expr = sp.sympify(expr)
    terms = sorted(sp.Add.make_args(expr), key=_time_term_key)
    out = ""
    for n, term in enumerate(terms):
        coeff, rest = term.as_coeff_Mul()
        sign = "-" if coeff < 0 else ("+" if n else "")
        magnitude = abs(coeff)
        if rest == 1:
            body = str(magnitude)
        else:
            body = ("" if magnitude == 1 else str(magnitude)) + _GREEK.get(str(rest), str(rest))
        out += sign + body
    return out


def _time_term_key(term):
    coeff, rest = term.as_coeff_Mul()
    if rest == 1:
        return (2, 0, "")
    return (0 if coeff > 0 else 1, _TIME_ORDER.get(str(rest), 9), str(rest))


def name_parts(name):
    """A name's letters and its subscript, at its first underscore: W_hh -> (W, hh); a name without both
    (h, _h, h_) -> (name, "")."""
    letters, _, sub = name.partition("_")
    return (letters, sub) if letters and sub else (name, "")


def name_text(text, math=True):
    """A name's characters as LaTeX in maths (math=False: in text, as in \\textrm{}): an underscore
    escaped, a Greek letter as Greek, any other letter outside ASCII as its code point."""
    out = []
    for char in text:
        letter = None if char.isascii() else greek(char)
        if char == "_":
            out.append(r"\_")
        elif char.isascii():
            out.append(char)
        elif letter is None:
            out.append(rf"\textrm{{{code_point(char)}}}" if math else code_point(char))
        elif math:
            out.append(letter + " " * letter.startswith("\\"))  # \beta x, not \betax
        else:
            out.append(f"${letter}$")
    return "".join(out).rstrip(" ")


# A name's suffix printed as an accent on its letters: (the LaTeX accent, the Unicode combining character)
ACCENTS = {"_bar": ("bar", "\u0304"), "_tilde": ("tilde", "\u0303"), "_hat": ("hat", "\u0302")}


def accented(name):
    """(the name without an accent's suffix, the accent of ACCENTS), or (name, None)."""
    for suffix, accent in ACCENTS.items():
        if name.endswith(suffix) and len(name) > len(suffix):
            return name.removesuffix(suffix), accent
    return name, None


def mathbf(letters):
    """Bold upright letters; a Greek letter, or its name (alpha, Gamma), bold Greek."""
    if letters in greek_letters_set or letters.lower() in greek_letters_set:
        return rf"\boldsymbol{{\{letters}}}"
    letter = greek(letters) if len(letters) == 1 else None
    if letter is not None:
        return rf"\boldsymbol{{{letter}}}"
    return rf"\mathbf{{{name_text(letters)}}}"


def layer(name, style=mathbf):
    """A name in a style, its trailing digits a layer superscript: `h2` -> `{\\mathbf{h}^{(2)}}`;
    an accent's suffix (ACCENTS) the accent, as for pre-activations: `i_bar` -> `\\bar{\\mathbf{i}}`."""
    stem, accent = accented(name)
    if accent:
        return rf"\{accent[0]}{{{layer(stem, style)}}}"
    digits = len(name) - len(name.rstrip("0123456789"))
    if digits == 0 or digits == len(name):
        return style(name)
    # braced, so that a subscript, ^\top or a power can follow
    return rf"{{{style(name[:-digits])}^{{({name[-digits:]})}}}}"


def dotted(letters):
    return rf"\dot{{{mathbf(letters)}}}"


def bold(name, style=mathbf):
    """`W_hh` -> `\\mathbf{W}_\\textrm{hh}`, `h` -> `\\mathbf{h}`, `W1` -> `\\mathbf{W}^{(1)}`; a layer's
    digits after the subscript's letters are its superscript, as a state's are:
    `W_ih1` -> `\\mathbf{W}^{(1)}_\\textrm{ih}`."""
    letters, sub = name_parts(name)
    digits = len(sub) - len(sub.rstrip("0123456789"))
    if 0 < digits < len(sub) and sub[:-digits].isalpha() and not letters[-1:].isdigit():
        letters, sub = letters + sub[-digits:], sub[:-digits]
    return layer(letters, style) + subscript(sub)


def sequence(name, time, style=mathbf):
    """A sequence at a time (LaTeX): `\\mathbf{h}_{t+1}`; a name's own subscript before the time's, so that
    `a_mu` reads as one name, `\\mathbf{a}_{\\textrm{mu},t}`; an accent's suffix the accent (`\\bar{\\mathbf{i}}_{t}`,
    Cho et al.'s candidate `h_tilde` as `\\tilde{\\mathbf{h}}_{t}`, a norm's `a_hat` as `\\hat{\\mathbf{a}}_{t}`)."""
    stem, accent = accented(name)
    letters, sub = name_parts(stem)
    base = layer(letters, style)
    if accent:
        base = rf"\{accent[0]}{{{base}}}"
    if sub and letters in STATISTICS:  # a norm's mean or deviation of a named value: mu_{a_in}, not mu_{"a_in"}
        return f"{base}_{{{bold(sub)},{time}}}"
    index = rf"\textrm{{{name_text(sub, math=False)}}},{time}" if sub else time
    return f"{base}_{{{index}}}"


def subscript(sub):
    """A name's subscript in upright letters, `_\\textrm{hh}`; an underscore in it (W_h1_h1) escaped."""
    return rf"_\textrm{{{name_text(sub, math=False)}}}" if sub else ""
