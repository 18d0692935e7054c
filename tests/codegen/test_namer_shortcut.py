"""codegen/namer.py's shortcut: when a scan of the source's words finds that no name would be respelled,
Namer.spell only shows the hidden names. Where it is taken, the full reading (Namer.respelled) writes the same
bytes; a model that takes one of the code's names, or a name the code makes from another of the model's, an
f-string, or a name outside ASCII, is read in full (what tests/codegen/test_names.py proves runs)."""

import importlib
import random

import pytest

from bptt.codegen.backends import BACKENDS
from bptt.codegen.namer import FSTRING, Namer, _holds_fstring
from bptt.codegen.names import HIDDEN, MARKER, shown
from bptt.derive.models import ZOO, load
from bptt.tests.support.named_cell import make


def hidden_sources(model):
    """(backend, the model's Namer, the source rendered from its hidden model) for every backend."""
    for name, backend in BACKENDS.items():
        render = importlib.import_module(backend.renderer).module_source
        namer = Namer(model)
        with namer.rendering(backend.title) as hidden:
            yield name, namer, render(hidden, None, False)


@pytest.mark.parametrize("name", sorted(ZOO))
def test_where_the_shortcut_is_taken_the_full_reading_writes_the_same_bytes(name):
    for backend, namer, source in hidden_sources(load(name)):
        assert namer._all_spelled_as_shown(source), f"{name}, {backend}: the zoo takes none of the code's names"
        assert namer.spell(source) == namer.respelled(source), f"{name}, {backend}"


# The code's own names (a scratch array, a module, a builtin) and names it makes from the state h (its adjoint,
# its step's value): the full reading respells a name (the shortcut would be wrong) in some backend.
RESPELLED = [dict(W="work"), dict(W="np"), dict(b="range"), dict(b="d_h"), dict(a="h_t")]


@pytest.mark.parametrize("choices", RESPELLED, ids=[next(iter(c.values())) for c in RESPELLED])
def test_a_model_that_takes_a_code_name_is_read_in_full(choices):
    respelled = []
    for backend, namer, source in hidden_sources(make(**choices)):
        assert namer.spell(source) == namer.respelled(source), f"{choices}, {backend}"
        if namer.respelled(source) != shown(source):
            assert not namer._all_spelled_as_shown(source), f"{choices}, {backend}"
            respelled.append(backend)
    assert respelled, f"{choices}: no backend's code takes the name"


def test_a_name_outside_ascii_is_read_in_full():
    for backend, namer, source in hidden_sources(make(W="W\u00e9")):
        assert not namer._all_spelled_as_shown(source), backend
        assert namer.spell(source) == namer.respelled(source), backend


def test_a_source_with_an_f_string_is_read_in_full():
    backend, namer, source = next(hidden_sources(make()))
    assert namer._all_spelled_as_shown(source)
    assert not namer._all_spelled_as_shown(source + '\nmessage = f"{x}"\n')


def test_the_scans_for_f_strings_and_hidden_names_find_what_their_patterns_find():
    """namer._holds_fstring (FSTRING searched from where its end can be) and names.shown (every marker dropped
    where each line pairs them) agree with their patterns searched plainly, on strings made of their pieces."""
    draw = random.Random(0)
    for _ in range(20000):
        text = "".join(draw.choice("fFrRbBx_ 1'\"\n.(") for _ in range(draw.randrange(12)))
        assert bool(_holds_fstring(text)) == bool(FSTRING.search(text)), text
        text = "".join(draw.choice([MARKER, "a", "\n", MARKER[:2], MARKER[1:]]) for _ in range(draw.randrange(10)))
        assert shown(text) == HIDDEN.sub(lambda match: match[1], text), text
