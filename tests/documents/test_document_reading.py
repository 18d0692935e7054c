"""The documents read as a student reads them (issue 29, items 2-7, 9 and 10), on every zoo document and on a
user's cells (examples/): each display follows the sentence that introduces it, each symbol is given before it is
used and means one thing, figures sit at the top of their own section in the PDF, the prose speaks of the maths and
not of the tool's rules, and each zoo document ends against its source."""

import re

import pytest

from bptt.derive.models import load
from bptt.derive.nodes import Adj
from bptt.documents.equation import Display, Figure
from bptt.documents.latex import latex
from bptt.tests.support.printed import DOCUMENTS, GROUP, ZOO, shown, shown_document

XDIST_GROUP = GROUP  # the documents of shown() are built once for the modules that read them


def sentences(text):
    """The sentences of a text, the `.` inside $...$ maths not ending one."""
    plain = re.sub(r"\$[^$]*\$", lambda m: "M" * len(m[0]), text)
    ends = [m.end() for m in re.finditer(r"[.:;] (?=[A-Z(])", plain)]
    return [text[a:b].strip() for a, b in zip([0, *ends], [*ends, len(text)], strict=True) if text[a:b].strip()]


def introductions(name):
    """(the text a display follows, the display, its section) for every display of a document: the display's own
    sentence, or the section's text (and the figures' captions) for a section's first display without one."""
    out = []
    for section in shown(name):
        before = section.text
        for item in section.items:
            if isinstance(item, Display):
                out.append((item.why or before, item, section))
                before = item.after
            elif not isinstance(item, Figure):
                before = getattr(item, "why", "")
    return out


def words(name):
    """Every sentence of a document: the sections' texts, the sentences before and after displays, tables,
    captions."""
    out = []
    for section in shown(name):
        out.append(section.text)
        for item in section.items:
            out += [getattr(item, "why", ""), getattr(item, "after", ""), getattr(item, "caption", "")]
    return " ".join(out)


@pytest.mark.parametrize("name", DOCUMENTS)
def test_every_display_follows_the_sentence_that_introduces_it(name):
    """The last sentence before a display ends with a colon and speaks of what is shown: it writes maths (a symbol
    of the display) or is one of the few plain lead-ins; a remark on a display (a bound's looseness, clipping's
    blind spot, a normal matrix's norm, that a bound cannot be read off) comes after it, never before another one."""
    remarks = ("loose where", "does nothing for vanishing", "normal matrix", "decide how much flows", "satisfies")
    for text, display, section in introductions(name):
        assert text.endswith(":"), (section.name, text[-200:])
        last = sentences(text)[-1]
        assert last != "So:" and not any(remark in last for remark in remarks), (section.name, last)
        assert "$" in last or last.startswith(LEAD_INS), (section.name, last, display.rows[0][:80])


LEAD_INS = (
    "The local terms, what each state's adjoint receives",
    "The adjoint of each intermediate value follows by the chain rule",
    "By the chain rule through the steps between",
)
