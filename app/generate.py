"""`bptt codegen`: the modules of the models asked for, written, or checked against what is there (--check)."""

import itertools
import pathlib
import shlex

import bptt.generated as generated
from bptt.app.arguments import UsageError, load_model
from bptt.app.files import output_folder, output_target, write_atomic
from bptt.codegen.backends import BACKENDS, module_filename, reference
from bptt.derive.models import ZOO, load, names

GENERATED = pathlib.Path(generated.__file__).parent
# A checkout holds pyproject.toml beside generated/; an installed bptt (site-packages) has none.
CHECKOUT = GENERATED.parent if (GENERATED.parent / "pyproject.toml").is_file() else None


def cmd_codegen(args):
    sources = {}
    backends = list(BACKENDS) if args.backend == "all" else [args.backend]
    for spec, backend in itertools.product(dict.fromkeys(args.models or names()), backends):
        model = load_model(spec)
        path = _folder(args, from_zoo=spec in ZOO) / module_filename(model, backend)
        if path in sources:
            raise UsageError(f"two models would write {path} (nothing was written)")
        if model.spec and path.resolve() == pathlib.Path(model.spec.rpartition(":")[0]).resolve():
            raise UsageError(
                f"the module for {spec} would replace the model file itself, {path}: "
                "rename the file or the model, or give --out (nothing was written)"
            )
        sources[path] = BACKENDS[backend].module_source(model, standalone=args.standalone)
    for path in sources:
        if path.parent.is_dir():  # a folder still to be made holds nothing to refuse
            output_target(path)  # refuses folders, devices, FIFOs before anything is written
    if args.check:
        return _report(args, sources)
    for path, text in sources.items():
        path.parent.mkdir(exist_ok=True)  # --out DIR, made as mkdir makes it: its parent exists (_folder)
        write_atomic(path, text)
        print(f"wrote {path}")
    return 0


def _folder(args, from_zoo):
    """Where a module goes: --out (a folder, or one to make in an existing folder); else the checkout's generated/
    for a zoo model, the current folder for a user's.

    Installed without a checkout, only --check may use the installed generated/ (reading it); writing needs --out."""
    if args.out is not None:
        return output_folder(args.out, "--out")  # made when written (not by --check), if only its parent exists
    if from_zoo and args.standalone:
        raise UsageError(
            f"--standalone: {GENERATED} holds the zoo's modules, which import bptt.runtime; "
            "give --out DIR for standalone ones (nothing was written)"
        )
    if not from_zoo:
        folder = pathlib.Path()
    elif CHECKOUT or args.check:
        folder = GENERATED
    else:
        raise UsageError(
            f"bptt is installed without its source checkout, and codegen never writes into {GENERATED}: "
            "give --out DIR to regenerate the zoo there"
        )
    return folder


def _report(args, sources):
    """codegen --check: name every missing, stale and (for the whole zoo) unexpected module; 1 if any."""
    outdated = [path for path, text in sources.items() if not path.exists() or path.read_bytes() != text.encode()]
    for path in outdated:
        print(f"{'stale' if path.exists() else 'missing'}: {path}")
    if outdated:
        backend = [] if args.backend == reference().name else ["--backend", args.backend]
        command = ["bptt", "codegen", *args.models, *backend, *(["--out", args.out] if args.out else [])]
        print(f"run `{shlex.join(command)}` to regenerate")
    unexpected = [] if args.models else _unexpected(sources)
    for path in unexpected:
        print(f"unexpected: {path} (no zoo model writes it: delete it, or move it out of this folder)")
    return 1 if outdated or unexpected else 0


def _unexpected(sources):
    """The *.py files (but __init__.py) in the output folders that no zoo model writes, in any backend."""
    folders = {path.parent for path in sources}
    written = {load(name).name for name in names()}
    expected = {folder / b.filename(name) for folder in folders for name in written for b in BACKENDS.values()}
    found = {path for folder in folders for path in folder.glob("*.py") if path.name != "__init__.py"}
    return sorted(found - expected)
