"""A user's plain text (a model's title, its source, a file's path) shown literally in a document.

LaTeX: pdflatex with the default fonts (OT1 Computer Modern, nothing beyond Debian's texlive-latex-base).
Each character is set as itself: TeX's special characters and those OT1 lacks (`< > |` would print as
`¡ ¿ —`) by their commands, ligatures (`--`, `''`, ``!` ``) broken, accented letters as an accent on their
letter, Greek in maths. A character the fonts do not have is shown as its code point, `U+4E2D`.

Markdown (CommonMark, GitHub's): every character that could start markup escaped, and a link's destination
percent-encoded, so that any file name is one destination."""

import re
import unicodedata
import urllib.parse

# ASCII characters that OT1 or TeX's syntax does not print as themselves.
_ASCII = {
    "&": r"\&",
    "%": r"\%",
    "#": r"\#",
    "_": r"\_",
    "$": r"$\$$",  # \$ in text is TS1's dollar, a font Debian's texlive-latex-base has only as METAFONT
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "\\": r"\textbackslash{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
    '"': r"{\ttfamily\char34}",
}
_LIGATURES = ("-`'!?", "-`'")  # OT1's ligatures (--, ``, '', !`, ?`): a first character, then a second
# Letters and signs the default fonts have, named by their commands (never a TS1 symbol: \\textbullet,
# \\copyright, \\pounds would need fonts METAFONT makes as bitmaps, if it is there at all).
_NAMED = {
    "\u00a0": "~",
    "ß": r"\ss{}",
    "æ": r"\ae{}",
    "Æ": r"\AE{}",
    "œ": r"\oe{}",
    "Œ": r"\OE{}",
    "ø": r"\o{}",
    "Ø": r"\O{}",
    "ł": r"\l{}",
    "Ł": r"\L{}",
    "ı": r"\i{}",
    "ȷ": r"\j{}",
    "¡": "{!`}",
    "¿": "{?`}",
    "§": r"$\S$",
    "¶": r"$\P$",
    "£": r"$\mathsterling$",
    "†": r"$\dagger$",
    "‡": r"$\ddagger$",
    "•": r"$\bullet$",
    "–": "{--}",
    "—": "{---}",
    "‘": "{`}",
    "’": "{'}",
    "“": "{``}",
    "”": "{''}",
    "…": r"\ldots{}",
    "×": r"$\times$",
    "÷": r"$\div$",
    "±": r"$\pm$",
    "·": r"$\cdot$",
    "°": r"$^\circ$",
    "µ": r"$\mu$",
    "→": r"$\rightarrow$",
    "←": r"$\leftarrow$",
    "≤": r"$\le$",
    "≥": r"$\ge$",
    "≠": r"$\ne$",
    "≈": r"$\approx$",
    "∞": r"$\infty$",
    "∑": r"$\sum$",
    "∂": r"$\partial$",
    "∇": r"$\nabla$",
}
# Combining accents: their text command (on a letter) and their maths command (on a Greek letter).
_ACCENTS = {
    "\u0300": ("\\`", r"\grave"),
    "\u0301": ("\\'", r"\acute"),
    "\u0302": (r"\^", r"\hat"),
    "\u0303": (r"\~", r"\tilde"),
    "\u0304": (r"\=", r"\bar"),
    "\u0306": (r"\u", r"\breve"),
    "\u0307": (r"\.", r"\dot"),
    "\u0308": (r"\"", r"\ddot"),
    "\u030a": (r"\r", r"\mathring"),
    "\u030b": (r"\H", None),
    "\u030c": (r"\v", r"\check"),
    "\u0323": (r"\d", None),
    "\u0327": (r"\c", None),
    "\u0331": (r"\b", None),
}
# Greek letters in maths: TeX's names, ε and φ as their usual shapes (\\varepsilon, \\varphi); the capitals
# without a command of their own are their Latin twins.
_SMALL = dict.fromkeys(
    "alpha beta gamma delta zeta eta theta iota kappa mu nu xi pi rho sigma tau upsilon chi psi omega".split()
) | {"epsilon": "varepsilon", "phi": "varphi", "lamda": "lambda", "final sigma": "varsigma", "omicron": "o"}
_CAPITAL = dict.fromkeys("Gamma Delta Theta Xi Pi Sigma Upsilon Phi Psi Omega".split()) | {"Lamda": "Lambda"}
_CAPITAL |= dict(
    zip("Alpha Beta Epsilon Zeta Eta Iota Kappa Mu Nu Omicron Rho Tau Chi".split(), "ABEZHIKMNOPTX", strict=True)
)


def code_point(char):
    """`U+4E2D`: how a character the fonts lack is shown."""
    return f"U+{ord(char):04X}"


def greek(char):
    """`\\alpha` for α, `A` for Α: a Greek letter in maths; None for any other character."""
    name = unicodedata.name(char, "")
    for prefix, table, spell in (
        ("GREEK SMALL LETTER ", _SMALL, str.lower),
        ("GREEK CAPITAL LETTER ", _CAPITAL, str.title),
    ):
        letter = spell(name.removeprefix(prefix))
        if name.startswith(prefix) and letter in table:
            letter = table[letter] or letter
            return letter if len(letter) == 1 else "\\" + letter
    return None


def _letter(char):
    """A character's LaTeX in text, or None when the default fonts lack it."""
    if " " <= char <= "~":
        return _ASCII.get(char, char)
    if char in _NAMED:
        return _NAMED[char]
    letter = greek(char)
    if letter is not None:
        return f"${letter}$"
    base, *marks = unicodedata.normalize("NFD", char)
    if not marks or any(mark not in _ACCENTS for mark in marks):
        return None
    letter = greek(base)
    if letter is not None:
        if any(_ACCENTS[mark][1] is None for mark in marks):
            return None
        for mark in marks:
            letter = rf"{_ACCENTS[mark][1]}{{{letter}}}"
        return f"${letter}$"
    inner = _letter(base)
    if inner is None or not base.isalpha():
        return None
    inner = {"i": r"\i{}", "j": r"\j{}"}.get(inner, inner)  # no dot under an accent
    for mark in marks:
        inner = rf"{_ACCENTS[mark][0]}{{{inner}}}"
    return inner


def tex_text(text, extra=None):
    """Plain text as LaTeX that prints it; `extra`: {character: LaTeX} taking precedence (a path's breaks)."""
    out, after_code_point = [], False
    text = str(text)
    for n, char in enumerate(text):
        tex = (extra or {}).get(char) or _letter(char)
        lacking = tex is None
        if lacking:  # breakable after it, a thin space from a code point before it
            tex = (r"\," if after_code_point else "") + rf"\texttt{{{code_point(char)}}}\allowbreak{{}}"
        elif char in _LIGATURES[0] and text[n + 1 : n + 2] in tuple(_LIGATURES[1]):
            tex += "{}"  # no ligature with the next character
        out.append(tex)
        after_code_point = lacking
    return "".join(out)


def tex_path(text):
    """A file's path for a `\\texttt{}`: plain text, breakable after any slash (a word pdflatex cannot hyphenate)."""
    return tex_text(text, {"/": r"/\allowbreak{}"})


# Shown as code points in Markdown: controls (a line break, a tab), line and paragraph separators, and lone
# surrogates (a file name's undecodable bytes), which UTF-8 cannot hold.
_UNSHOWN = ("Cc", "Cs", "Zl", "Zp")
# ASCII punctuation that may start CommonMark or GitHub markup inside a line: emphasis, code, links, raw HTML
# and entities, maths, strikethrough, a heading's closing #s, table cells.
_MARKUP = set("\\`*_[]<>#|$~&")


def md_text(text):
    """Plain text as Markdown inline content that shows it as written; a character of _UNSHOWN as its code point."""
    out = []
    for char in str(text):
        if char in _MARKUP:
            out.append("\\" + char)
        elif unicodedata.category(char) in _UNSHOWN:
            out.append(code_point(char))
        else:
            out.append(char)
    return "".join(out)


def md_code(text):
    """Text as a CommonMark code span: fenced by more backticks than any run of them inside it."""
    text = "".join(code_point(c) if unicodedata.category(c) in _UNSHOWN else c for c in str(text))
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    padded = f" {text} " if text.startswith("`") or text.endswith("`") else text
    return f"{fence}{padded}{fence}"


def md_destination(name):
    """A relative file name as a link destination CommonMark reads as one, whatever its characters:
    percent-encoded UTF-8 (a space %20, `(` %28), which the browser decodes back to the file's name."""
    return urllib.parse.quote(str(name), safe="")
