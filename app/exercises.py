"""`bptt exercises`: a model's exercises, each a problem sheet and a solution sheet with every answer exact."""

import sys

from bptt.app.arguments import UsageError, load_model
from bptt.app.files import output_folder, output_target, write_atomic
from bptt.documents.exercises.instance import NotExact
from bptt.documents.exercises.render import KINDS, sheets

MOST = 100  # instances in one run, at most: each takes a fraction of a second, and a teacher hands out a few


def file_names(model, seed, fmt):
    """{sheet kind: file name} of one instance: the model's name, the seed and the kind, as elman-3-problems."""
    return {kind: f"{model.name}-{seed}-{kind}.{fmt}" for kind in KINDS}


def cmd_exercises(args):
    if args.count > MOST:
        raise UsageError(f"--count {args.count}: at most {MOST} instances at a time (run again with another --seed)")
    model = load_model(args.model)
    seeds = range(args.seed, args.seed + args.count)
    folder = None if args.output is None else output_folder(args.output, "-o")
    targets = {}
    if folder is not None:  # every file it would replace: a regular file or nothing, before any work
        targets = {
            seed: {k: folder / name for k, name in file_names(model, seed, args.format).items()} for seed in seeds
        }
        for paths in targets.values():
            for path in paths.values():
                if folder.is_dir():
                    output_target(path)
    try:
        texts = {seed: sheets(model, seed, args.format) for seed in seeds}
    except NotExact as error:
        raise UsageError(f"model {model.name!r}: {error}") from error
    if folder is None:
        sys.stdout.write("\n".join(text for sheet in texts.values() for text in sheet.values()))
        return 0
    folder.mkdir(exist_ok=True)
    for seed, sheet in texts.items():
        for kind, text in sheet.items():
            write_atomic(targets[seed][kind], text)
            print(f"wrote {targets[seed][kind]}", file=sys.stderr)
    return 0
