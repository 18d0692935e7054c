"""How wide a piece of the printer's LaTeX comes out in a display at 11pt, estimated in points.

The estimate reads the printed piece glyph by glyph and adds widths in ems (1 em = 10.95pt at 11pt):
a letter its width in the Computer Modern font it is set in (math italic, bold, roman), a digit 0.5
(bold 0.575); a binary operator (+, -, \\odot) its glyph and the medium spaces
around it (1.22), a relation (=, \\nmid) the thick ones (1.33); a subscript or superscript 70% of the
size around it, a subscript and a superscript on one base the wider of the two; a fraction its wider
part and 0.4; \\left and \\right delimiters 0.65 each around something taller than a letter (a fraction, a
sum, an accent or a superscript), 0.45 around a line of letters; \\sum and \\prod the wider of the sign and its limits.
A command it does not know counts 1 em, so that it errs wide. Measured against pdflatex on every
piece of the zoo's documents it is within about 10% and mostly wide.
"""

import functools

EM = 10.95  # points in an em at 11pt

_FONT_COMMANDS = {
    "mathbf": "bold",
    "boldsymbol": "bold",
    "textbf": "bold",
    "textrm": "roman",
    "mathrm": "roman",
    "text": "roman",
    "operatorname": "roman",
    "mathbb": "bold",
    "mathcal": "italic",
}
_ACCENTS = {"dot", "bar", "hat", "tilde", "vec", "widehat", "overline"}
_BINARY = {"odot", "cdot", "times", "pm", "mp", "circ", "otimes", "oplus", "setminus"}
_RELATIONS = {"le", "ge", "leq", "geq", "nmid", "mid", "in", "approx", "to", "sim", "ne", "neq", "equiv", "mapsto"}
_SYMBOLS = {
    "partial": 0.57,
    "top": 0.78,
    "infty": 1.0,
    "ldots": 1.2,
    "cdots": 1.2,
    "ell": 0.42,
    "|": 0.5,
    "nabla": 0.83,
}
_SPACES = {"quad": 1.0, "qquad": 2.0, ",": 1 / 6, ":": 4 / 18, ";": 5 / 18, "!": -1 / 6, " ": 0.33}
_BIG_OPERATORS = {"sum": 1.45, "prod": 1.3, "int": 0.8}
# Letter widths in ems of Computer Modern: math italic (cmmi), bold (cmbx), roman (cmr), a to z then A to Z; bold f
# with its italic correction, which TeX adds before a script (f^{(1)}, a second layer's forget gate).
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_EMS = {
    "italic": ".53 .43 .43 .52 .47 .49 .48 .58 .35 .41 .52 .3 .88 .6 .49 .5 .45 .45 .47 .36 .57 .49 .72 .57 .49 .47 "
    ".75 .76 .72 .83 .74 .64 .79 .83 .44 .56 .85 .68 .97 .8 .76 .64 .79 .76 .61 .58 .68 .58 .94 .83 .58 .68",
    "bold": ".56 .64 .51 .64 .53 .43 .58 .64 .32 .35 .61 .32 .96 .64 .58 .64 .61 .47 .45 .45 .64 .61 .83 .61 .61 .51 "
    ".87 .82 .83 .88 .76 .72 .9 .9 .44 .59 .9 .69 1.09 .9 .86 .79 .86 .86 .64 .8 .89 .87 1.19 .87 .87 .7",
    "roman": ".5 .56 .44 .56 .44 .31 .5 .56 .28 .31 .53 .28 .83 .56 .5 .56 .53 .39 .39 .39 .56 .53 .72 .53 .53 .44 "
    ".75 .71 .72 .76 .68 .65 .79 .75 .36 .51 .78 .63 .92 .75 .78 .68 .78 .74 .56 .72 .75 .75 1.03 .75 .75 .61",
}
_LETTER_EMS = {font: dict(zip(_LETTERS, map(float, ems.split()), strict=True)) for font, ems in _EMS.items()}
_PUNCTUATION = {"(": 0.39, ")": 0.39, "[": 0.28, "]": 0.28, ",": 0.45, ";": 0.45, ".": 0.28, "|": 0.28, "/": 0.5}
_TALL = {"\\frac", "\\dfrac", "\\sum", "\\prod", "^", *(f"\\{accent}" for accent in _ACCENTS)}
_BINARY_EM = 0.78 + 8 / 18
_RELATION_EM = 0.78 + 10 / 18
_SCRIPT = 0.7


@functools.cache
def width(latex):
    """The estimated width in points of a piece of math-mode LaTeX, set in a display."""
    reader = _Reader(_tokens(latex))
    return reader.sequence(1.0, "italic") * EM


def _tokens(latex):
    """Control words (`\\frac`), control symbols (`\\,`), and single characters; spaces dropped."""
    out, n = [], 0
    while n < len(latex):
        char = latex[n]
        if char == "\\":
            end = n + 1
            while end < len(latex) and latex[end].isalpha():
                end += 1
            end = max(end, n + 2)
            out.append(latex[n:end])
            n = end
        else:
            if not char.isspace():
                out.append(char)
            n += 1
    return out


class _Reader:
    """A recursive reading of the tokens: each method returns a width in ems at the given scale."""

    def __init__(self, tokens):
        self.tokens, self.at = tokens, 0
        self.delimiters = []  # the width of each \\left's delimiter, until its \\right

    def tall_until_right(self):
        """Whether the tokens up to the \\right that closes the \\left just read hold something taller than a letter."""
        depth = 0
        for token in self.tokens[self.at :]:
            if token == "\\left":
                depth += 1
            elif token == "\\right":
                if not depth:
                    return False
                depth -= 1
            elif token in _TALL:
                return True
        return False

    def next(self):
        token = self.tokens[self.at] if self.at < len(self.tokens) else "}"
        self.at += 1
        return token

    def peek(self):
        return self.tokens[self.at] if self.at < len(self.tokens) else "}"

    def sequence(self, scale, font):
        """Items up to the closing brace of the group (or the end)."""
        total = 0.0
        while self.peek() != "}":
            total += self.item(scale, font)
        self.next()
        return total

    def argument(self, scale, font):
        token = self.next()
        if token == "{":
            return self.sequence(scale, font)
        return self.glyph(token, scale, font)

    def item(self, scale, font):
        """One base with its scripts."""
        token = self.next()
        limits = token[1:] in _BIG_OPERATORS
        base = self.sequence(scale, font) if token == "{" else self.glyph(token, scale, font)
        scripts = []
        while self.peek() in ("_", "^"):
            self.next()
            scripts.append(self.argument(scale * _SCRIPT, font))
        if limits:
            return max([base, *scripts])
        return base + max(scripts, default=0.0)

    def environment(self, scale, font):
        """A matrix (bmatrix): its widest row between its brackets, rows being set one above the other."""
        self.argument(scale, font)  # the environment's name
        rows = [0.0]
        while self.peek() not in ("\\end", "}"):
            if self.peek() == "\\\\":
                self.next()
                rows.append(0.0)
            else:
                rows[-1] += self.item(scale, font)
        if self.next() == "\\end":
            self.argument(scale, font)
        return max(rows) + 2 * 0.45 * scale

    def glyph(self, token, scale, font):
        if token.startswith("\\"):
            return self.command(token[1:], scale, font)
        if token in "+-" or token == "*":
            return _BINARY_EM * scale
        if token in "=<>":
            return _RELATION_EM * scale
        if token.isalpha():
            return _LETTER_EMS[font].get(token, 0.75) * scale
        if token.isdigit():
            return (0.575 if font == "bold" else 0.5) * scale
        if token == "&":
            return 0.0
        return _PUNCTUATION.get(token, 0.5) * scale

    def command(self, name, scale, font):
        if name in ("frac", "dfrac", "tfrac"):
            inner = scale * _SCRIPT if name == "tfrac" or scale < 1 else scale
            return max(self.argument(inner, font), self.argument(inner, font)) + 0.4 * scale
        if name in _FONT_COMMANDS:
            extra = 1 / 6 if name == "operatorname" else 0.0
            return self.argument(scale, _FONT_COMMANDS[name]) + extra * scale
        if name in _ACCENTS:
            return self.argument(scale, font)
        if name == "begin":
            return self.environment(scale, font)
        if name == "left":
            delimiter = self.next()
            self.delimiters.append(0.65 if self.tall_until_right() else 0.45)
            return (0.1 if delimiter == "." else self.delimiters[-1]) * scale
        if name == "right":
            delimiter = self.next()
            size = self.delimiters.pop() if self.delimiters else 0.65
            return (0.1 if delimiter == "." else size) * scale
        if name in ("bigl", "bigr", "Bigl", "Bigr", "big", "Big"):
            delimiter = self.next()
            return (0.1 if delimiter == "." else 0.65) * scale
        if name in _BIG_OPERATORS:
            return _BIG_OPERATORS[name] * scale
        if name in _BINARY:
            return _BINARY_EM * scale
        if name in _RELATIONS:
            return _RELATION_EM * scale
        if name in _SPACES:
            return _SPACES[name] * scale
        if name in _SYMBOLS:
            return _SYMBOLS[name] * scale
        if name in ("log", "exp", "tanh", "min", "max", "sin", "cos", "sinh", "cosh", "det", "ln"):
            return (0.48 * len(name) + 1 / 6) * scale
        if len(name) > 1 and name.isalpha() and name.lower() in _GREEK:
            return (0.75 if name[0].isupper() else 0.6) * scale
        return 1.0 * scale


_GREEK = set(
    "alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu nu xi pi rho "
    "sigma tau upsilon phi varphi chi psi omega".split()
)
