"""Every path of the repository that the README, docs/*.md, or a docstring or comment of the project's Python
sources names exists, so that a reader can follow it.

A path is a word with a slash that starts at one of the repository's folders, or ends in `/` or in a file
extension (`derive/models/elman.py`, `derive/models/`, `models/elman.py`), or a file name with an extension
(`elman.py`). One that starts at a top-level folder or file is read from the repository's root; any other is
the end of a path of the repository (`models/elman.py` is derive/models/elman.py, as docs/architecture.md's
tree and a docstring inside a folder name a path). A placeholder (`<model>`, `{name}`, `*`, or a word in capitals such
as MODEL or DIR) stands for any name: `generated/<model>.py` must match a file. NOT_THE_REPOSITORYS lists the
words that look like paths and name none of the repository's: files a user or a test writes, and a ratio;
each is still named somewhere.

A module named by its dotted path from a top-level folder (`derive.models.elman`, `bptt.derive.models.load`)
exists too, and so does the name it is followed by, if any, at the module's top level."""

import ast
import fnmatch
import functools
import io
import os
import pathlib
import re
import tokenize

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCES = ("derive", "documents", "codegen", "runtime", "app", "benchmarks", "tests")
TOP = (*SOURCES, "generated", "docs", "examples")  # a word starting with one of these is a path, even once gone
EXTENSIONS = "py md j2 json js toml txt tex sh cfg ipynb csv png pdf html".split()
FILE_NAME_EXTENSIONS = set(EXTENSIONS) - {"js"}  # a name alone: Node.js and commonmark.js are software
SKIPPED = {".git", ".venv", "node_modules", "__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis"}
CANDIDATE = re.compile(r"(?<![\w.:/\\~$-])([\w.*<>{}-]+(?:/[\w.*<>{}-]+)*/?)(?![\w/(])")
MODULE = re.compile(rf"(?<![\w./-])((?:bptt\.)?(?:{'|'.join(TOP)})(?:\.\w+)+)(?![\w/])")
PLACEHOLDER = re.compile(r"<[^<>/]*>|\{[^{}/]*\}|\b[A-Z][A-Z_]+\b")
NOT_THE_REPOSITORYS = {
    "path.py", "path/to/file.py", "file.py", "elman.tex", "my_gru.tex",  # a user's files, in the README's commands
    "link.tex", "real.tex", "other/hop.tex", "missing/x.tex", "sigmoid_rnn.py",  # a test's files
    "generated/peer",  # `bench`'s ratio of the generated module's time to a peer's
    "benchmarks/fastrnns/custom_lstms.py",  # PyTorch's repository's: its LayerNormLSTMCell
}  # fmt: skip


@functools.cache
def named_texts():
    """(file, line, text) for the README, docs/*.md, and every docstring and comment of the sources."""
    texts = [(path, 1, path.read_text(encoding="utf-8")) for path in [ROOT / "README.md", *ROOT.glob("docs/*.md")]]
    sources = [path for top in SOURCES for path in (ROOT / top).rglob("*.py")] + list(ROOT.glob("*.py"))
    for path in sorted(sources):
        code = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                if (docstring := ast.get_docstring(node, clean=False)) is not None:
                    texts.append((path, node.body[0].lineno, docstring))
        tokens = tokenize.generate_tokens(io.StringIO(code).readline)
        texts += [(path, token.start[0], token.string) for token in tokens if token.type == tokenize.COMMENT]
    return tuple(texts)


@functools.cache
def paths():
    """Every file and folder of the repository (caches, environments and node_modules aside), from the root."""
    found = []
    for folder, folders, files in os.walk(ROOT):
        folders[:] = [name for name in folders if name not in SKIPPED]
        found += [pathlib.Path(folder, name).relative_to(ROOT).as_posix() for name in folders + files]
    return tuple(found)


@functools.cache
def folder_names():
    return {path.rpartition("/")[2] for path in paths() if (ROOT / path).is_dir()}


def is_path(word):
    """Whether a word of prose names a path: `dL/dW`, `c_t/`, `and/or`, `1/2` and web addresses do not."""
    first, *rest = word.split("/")
    last = word.rstrip("/").rpartition("/")[2]
    extension = last.rpartition(".")[2] if "." in last.lstrip(".") else None
    if not re.match(r"\.?[\w<{*]", first) or re.search(r"[<>{}]", PLACEHOLDER.sub("", word)):
        return False  # `../`, or a brace of LaTeX
    if not rest:
        return extension in FILE_NAME_EXTENSIONS
    if "." in first.lstrip("."):
        return False  # a host name
    return extension in EXTENSIONS or first in TOP or first in folder_names()


def exists(word):
    """Whether the path is one of the repository's: from the root if it starts at a top-level folder or file,
    else the end of one; with a placeholder, whether any matches."""
    pattern = re.sub(r"\*+", "*", PLACEHOLDER.sub("*", word.rstrip("/")))
    first = word.partition("/")[0]
    anchored = "/" in word and (first in TOP or (ROOT / first).exists())
    return any(
        fnmatch.fnmatchcase(path, pattern) or (not anchored and fnmatch.fnmatchcase(path, "*/" + pattern))
        for path in paths()
    )


@functools.cache
def top_level_names(module):
    """The names a module's file binds at its top level: functions, classes, assignments, imports."""
    names = set()
    for node in ast.parse(module.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(name.id for target in targets for name in ast.walk(target) if isinstance(name, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).partition(".")[0] for alias in node.names)
    return names


def module_exists(dotted):
    """Whether `top.module` (or a package) is a file of the repository, and the name after it, if any, is
    bound at its top level."""
    parts = dotted.removeprefix("bptt.").split(".")
    for length in range(len(parts), 0, -1):
        path = ROOT.joinpath(*parts[:length])
        if path.with_suffix(".py").is_file() or path.is_dir():
            break
    if length == 1 or length == len(parts):
        return length == len(parts)
    module = path.with_suffix(".py") if path.with_suffix(".py").is_file() else path / "__init__.py"
    return module.is_file() and parts[length] in top_level_names(module)


@functools.cache
def named_modules():
    """{(dotted name, where): line} for every module named by its dotted path."""
    return named(MODULE, lambda dotted: dotted.rpartition(".")[2] not in EXTENSIONS)  # a file's name, not a module


@functools.cache
def named_paths():
    """{(path, where): line} for every path named."""
    return named(CANDIDATE, is_path)


def named(pattern, chosen):
    """{(word, where): line} for the words of the named texts that match pattern and are chosen, `where` the
    naming file relative to the root, `line` the first line naming the word there."""
    found = {}
    for path, line, text in named_texts():
        for match in pattern.finditer(text):
            word = match[1].rstrip(".")
            if chosen(word):
                found.setdefault((word, path.relative_to(ROOT).as_posix()), line + text.count("\n", 0, match.start()))
    return found


def test_every_named_path_exists():
    missing = [
        f"{where}:{line}: {word}"
        for (word, where), line in sorted(named_paths().items(), key=lambda item: item[0][::-1])
        if word not in NOT_THE_REPOSITORYS and not exists(word)
    ]
    assert not missing, "paths named that do not exist:\n" + "\n".join(missing)


def test_every_named_module_exists():
    missing = [
        f"{where}:{line}: {dotted}"
        for (dotted, where), line in sorted(named_modules().items(), key=lambda item: item[0][::-1])
        if not module_exists(dotted)
    ]
    assert not missing, "modules named that do not exist:\n" + "\n".join(missing)


def test_the_words_that_are_no_paths_are_still_named():
    words = {word for word, _ in named_paths()}
    assert NOT_THE_REPOSITORYS <= words, f"named no more: {sorted(NOT_THE_REPOSITORYS - words)}"


def test_the_scan_finds_paths_and_misses_prose():
    """The rules on words: paths are found, fractions and alternatives are not; a moved file is missing."""
    assert all(map(is_path, ["derive/models/elman.py", "derive/models/", "design.md", "models/elman.py", "x/y.j2"]))
    assert not any(map(is_path, ["dL/dW", "c_t/", "and/or", "1/2", "docs.python.org/3/x.html", ".py", "../", "1}/"]))
    assert exists("models/elman.py") and exists("README.md") and exists("generated/<model>_torch.py")
    assert not exists("derive/no_such.py") and not exists("design.md") and not exists("generated/<model>.tex")
    assert not exists("man.py")  # the end of a path is whole names
    assert not exists("models/README.md")  # not anchored: no models/ folder holds it
    assert not exists("models/bptt.py") and exists("derive/bptt.py")  # anchored at the root: derive/models/ has none
    assert module_exists("derive.models.elman") and module_exists("bptt.derive.models.load")
    assert not module_exists("derive.elman") and not module_exists("derive.models.elman.no_such_function")
