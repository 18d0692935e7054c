"""One namer per generated module: the model's names first, the code's own around them (as google/tangent's
Namer does), so a model may name a variable `k`, `scale`, `work`, `np` or `range` in every backend.

The printers and templates write the code's own names plainly (`work`, `t`, `keep`, `np`, `range`, `d_h`).
To tell those apart from the model's, the module is rendered from a hidden copy of the model whose every
name is wrapped in MARKER (names.hidden_name): then each identifier of the rendered source is either the
model's (a hidden name), made from one of the model's (`d_` + hidden h, hidden h + `_t`), or the code's own
(no MARKER). `Namer.spell` then writes the module:
- the model's names as the model gives them: they win;
- a code name that one of the model's takes gets another spelling (`work` -> `_work`, `np` -> `_np`, a
  builtin `range` -> `_range`, bound once after the imports) where the two meet: a function's own name in
  that function, a module's name (or a builtin) everywhere once a function reading it meets the model's
  (renaming.py); elsewhere, and in a module whose model takes none of the code's names, the code reads
  as the printers wrote it;
- a name made from the model's keeps its plain spelling (`d_h`, `h0`, `n_k`) unless the model or the code
  already takes it (a parameter `d_h` beside a state `h`): then it too gets another spelling (`_d_h`).
Another spelling is the name with a leading `_` (derive/model.py refuses such names, so they are never a
model's), then with a trailing `_` too, then numbered: `_work`, `_work_`, `_work_2`, ... The code already
keeps `_` for its own (scratch arrays `_W_T`, helpers `_check_params`), so `_np` reads as "the code's np".
Comments and docstrings read the model's names as written. The same model gives the same bytes.
Most models take none of the code's names: a scan of the source's words says so, and `spell` then only shows
the hidden names, without reading the source by ast (tests/codegen/test_namer_shortcut.py).
"""

import ast
import contextlib
import dataclasses
import functools
import re

import sympy as sp

from bptt.codegen.names import HIDDEN, MARKER, hidden_name, shown
from bptt.codegen.renaming import (
    apply,
    bound_names,
    code_edits,
    identifier_places,
    module_names,
    parse_statements,
    top_statements,
    walk,
)
from bptt.derive.model import ModelError, Seq, renamed
from bptt.derive.nodes import SeqAt
from bptt.derive.refusal import Refusal, refusing


@dataclasses.dataclass(frozen=True)
class Namer:
    """The names of one generated module: `hidden` is the model to render, `spell` writes the rendered source."""

    model: object

    @functools.cached_property  # spell reads them more than once; a Model is frozen
    def names(self):
        """Every name the model gives: sizes, parameters, sequences."""
        return (
            {s.name for s in self.model.sizes}
            | {p.name for p in self.model.params}
            | {seq.name for seq in self.model.sequences()}
        )

    @contextlib.contextmanager
    def rendering(self, backend):
        """Yields the hidden model to render; a refusal or a ModelError raised meanwhile names the model's
        names as the model gives them."""
        hidden = hide(self.model)
        try:
            with refusing(hidden, backend):
                yield hidden
        except Refusal as error:
            error.what, error.equation = shown(error.what), error.equation and shown(error.equation)
            raise
        except ModelError as error:
            raise ModelError(shown(str(error))) from error

    def spell(self, source):
        """The rendered source of the hidden model, with the model's names, the code's, and the names made
        from the model's spelled as this module's policy says (the module docstring)."""
        return shown(source) if self._all_spelled_as_shown(source) else self.respelled(source)

    def respelled(self, source):
        """spell's source read in full: each identifier by ast, where each name resolves by Python's scopes."""
        lines = source.splitlines()
        statements = top_statements(lines)
        tree = parse_statements(lines, [s for s in statements if MARKER in "".join(lines[s[0] - 1 : s[1]])])
        nodes = walk(tree)  # only the statements that meet the model's names are parsed: not helpers
        places = list(identifier_places(nodes, lines))
        words = {word for _, _, word in places} | bound_names(nodes) | module_names(lines, statements)
        code = {word for word in words if MARKER not in word}
        used = code | self.names
        spellings = {}
        for name in sorted(code & {shown(word) for word in words if HIDDEN.fullmatch(word)}):
            spellings[name] = _fresh(name, used)
        made = {}
        for word in sorted(w for w in words if MARKER in w and not HIDDEN.fullmatch(w)):
            made[word] = shown(word) if shown(word) not in used else _fresh(shown(word), used)
            used.add(made[word])
        reading = {}

        def clashes(name, function):
            """Whether the function (with those inside it) reads or binds the model's name."""
            if function not in reading:
                inner = walk(function)
                reading[function] = {n.id for n in inner if isinstance(n, ast.Name)}
                reading[function] |= {n.arg for n in inner if isinstance(n, ast.arg)}
            return hidden_name(name) in reading[function]

        edits, builtin = code_edits(tree, nodes, lines, spellings, clashes, MARKER) if spellings else ([], {})
        if edits is None:  # a module-level name, or an argument a call may pass by keyword: the whole module
            whole = ast.parse(source)
            edits, builtin = code_edits(whole, walk(whole), lines, spellings, clashes, MARKER, whole=True)
        spelled = {word: made[word] if word in made else shown(word) for word in words if MARKER in word}
        edits += [(row, col, word, spelled[word]) for row, col, word in places if word in spelled]
        edits += _key_edits(nodes, lines, made)
        return _bind_builtins(shown(apply(source, edits)), builtin)  # then the comments' and docstrings' names

    def _all_spelled_as_shown(self, source):
        """Whether spell would write every name as shown: no code name is one of the model's, no name made from
        the model's is taken, and no f-string may hold a model's name (which spell refuses). Read from every
        word of the source outside strings and comments: for ASCII names, a superset of the identifiers spell
        reads (an ASCII identifier is a maximal ASCII word), so that nothing respelled here is nothing there."""
        if not all(name.isascii() for name in self.names) or _holds_fstring(source):
            return False
        words = set(CODE_WORD.findall(source)) - {""}  # a string or comment found is "": no word
        code = {word for word in words if MARKER not in word}
        if code & {shown(word) for word in words if HIDDEN.fullmatch(word)}:
            return False
        used = code | self.names
        for word in sorted(w for w in words if MARKER in w and not HIDDEN.fullmatch(w)):
            if shown(word) in used:
                return False
            used.add(shown(word))
        return True


FSTRING = re.compile(r"""\b[rRbB]?[fF][rR]?['"]""")
FSTRING_END = re.compile(r"""[fF][rR]?['"]""")  # where an FSTRING match ends: found by a fast scan


def _holds_fstring(source):
    """Whether FSTRING matches in source (an f-string's prefix), searched from where its end can be."""
    return any(
        FSTRING.match(source, max(0, found.start() - 1), found.end()) or FSTRING.match(source, found.start())
        for found in FSTRING_END.finditer(source)
    )


# Strings and comments, as Python reads them from left to right (an f-string's braces aside)
NOT_CODE = re.compile(
    "|".join((r"'''[\s\S]*?'''", r'"""[\s\S]*?"""', r"'(?:\\.|[^'\\\n])*'", r'"(?:\\.|[^"\\\n])*"', r"#[^\n]*"))
)
# Every word of code, read in one pass: a string or a comment is matched whole (its group empty), so no word is
# read inside one (the words of the source with NOT_CODE blanked out)
CODE_WORD = re.compile(NOT_CODE.pattern + r"|(\w+)", re.ASCII)


@functools.lru_cache(maxsize=16)  # every backend renders the same hidden model (a Model is a frozen dataclass)
def hide(model):
    """The model with every size, parameter and sequence's name hidden (nothing else changes: derive.model.renamed,
    not checked again)."""
    sizes = {s: sp.Symbol(hidden_name(s.name), **s.assumptions0) for s in model.sizes}
    params = {
        p: sp.MatrixSymbol(hidden_name(p.name), *(sp.sympify(n).xreplace(sizes) for n in p.shape)) for p in model.params
    }

    def expr(e):
        if not isinstance(e, sp.Basic):
            return e
        found = {a: SeqAt(hidden_name(a.name), a.time, a.rows.xreplace(sizes), a.role) for a in e.atoms(SeqAt)}
        return e.xreplace({**sizes, **params, **found})

    def seq(s):
        return Seq(hidden_name(s.name), sp.sympify(s.rows).xreplace(sizes), s.role)

    def pairs(items):
        return tuple((seq(s), expr(e)) for s, e in items)

    return renamed(
        model,
        sizes=tuple(sizes.values()),
        params=tuple(params.values()),
        inputs=tuple(seq(s) for s in model.inputs),
        steps=pairs(model.steps),
        outputs=pairs(model.outputs),
        loss=expr(model.loss),
        code_loss=expr(model.code_loss),
        names=pairs(model.names),
        teacher_forcing=pairs(model.teacher_forcing),
    )


def _fresh(name, used):
    """`_name`, `_name_`, `_name_2`, ...: the first not in used (which it joins)."""
    base = "_" + name
    for spelling in [base, base + "_"] + [f"{base}_{n}" for n in range(2, len(used) + 3)]:
        if spelling not in used:
            used.add(spelling)
            return spelling
    raise AssertionError("unreachable: more spellings than names")


def _key_edits(nodes, lines, made):
    """(line, column, old, new) for each string that is one name made from the model's (a dict's key, quoted):
    spelled as that name."""
    edits = []
    for node in nodes:
        if isinstance(node, ast.JoinedStr) and MARKER in "".join(lines[node.lineno - 1 : node.end_lineno]):
            raise AssertionError(f"namer: an f-string names a model's name, which the namer cannot respell: {node}")
        if isinstance(node, ast.Constant) and node.value in made and node.lineno == node.end_lineno:
            line = lines[node.lineno - 1]
            start = len(line.encode()[: node.col_offset].decode())
            text = line[start : start + len(node.value) + 2]
            if text[0] in "'\"" and text[0] == text[-1]:
                edits.append((node.lineno, start, text, f"{text[0]}{made[node.value]}{text[0]}"))
    return edits


def _bind_builtins(source, builtin):
    """The source with each builtin the model takes bound under its other spelling after the imports."""
    if not builtin:
        return source
    tree = ast.parse(source)
    imports = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    after = imports[-1].end_lineno if imports else 0
    lines = source.splitlines(keepends=True)
    binding = "".join(
        f"{new} = {name}  # the builtin (the model names a variable {name})\n" for name, new in sorted(builtin.items())
    )
    return "".join(lines[:after]) + "\n" + binding + "".join(lines[after:])
