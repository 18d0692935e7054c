"""The model zoo, and loading a user's model from `file.py:name`."""

import dataclasses
import functools
import importlib.util
import pathlib

from bptt.derive.model import Model, ModelError
from bptt.derive.models.birnn import birnn
from bptt.derive.models.elman import elman
from bptt.derive.models.elman_onehot import elman_onehot
from bptt.derive.models.gated import gru, lstm, lstm_peephole
from bptt.derive.models.jordan import elman_jordan, jordan
from bptt.derive.models.layernorm import lstm_layernorm
from bptt.derive.models.linear import linear
from bptt.derive.written import built

ZOO = {
    "birnn": birnn,
    "elman": elman,
    "elman-jordan": elman_jordan,
    "elman-onehot": elman_onehot,
    "gru": gru,
    "jordan": jordan,
    "linear": linear,
    "lstm": lstm,
    "lstm-layernorm": lstm_layernorm,
    "lstm-peephole": lstm_peephole,
}


def names():
    return sorted(ZOO)


def load(spec):
    """A model by zoo name, or from a user's Python file as `path/to/file.py:function`."""
    if spec in ZOO:
        return _zoo_model(spec)
    if ":" not in spec:
        raise ModelError(f"unknown model {spec!r}; known models: {', '.join(names())} (or give file.py:function)")
    path, _, attr = spec.rpartition(":")
    if not path.strip() or not attr.strip():
        missing = "no file before" if not path.strip() else "no function's name after"
        raise ModelError(f"expected file.py:function, got {spec!r}: it has {missing} the colon")
    return _load_file(pathlib.Path(path), attr)


@functools.cache
def _zoo_model(name):
    """A zoo model, built once per process (lstm-layernorm takes 0.15 s): a Model is frozen, so callers share it."""
    return built(ZOO[name])


def _load_file(path, attr):
    if not path.is_file():
        kind = "is not a file" if path.exists() else "does not exist"
        raise ModelError(f"model file {str(path)!r} {kind} (expected file.py:function)")
    module_spec = importlib.util.spec_from_file_location(f"bptt_user_{path.stem}", path)
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except SystemExit as error:
        raise ModelError(f"model file {str(path)!r} called sys.exit({error.code!r}) while loading") from None
    except Exception as error:
        raise ModelError(f"model file {str(path)!r} failed to load: {type(error).__name__}: {error}") from error
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ModelError(f"model file {str(path)!r} has no function {attr!r}")
    try:
        model = built(factory)
    except ModelError as error:
        if str(error).startswith("model "):  # the model's own description: it names the model
            raise
        raise ModelError(f"{path}:{attr}(): {error}") from None  # e.g. sequence(): named by where it was called
    except SystemExit as error:
        raise ModelError(f"model file {str(path)!r}: {attr}() called sys.exit({error.code!r})") from None
    except Exception as error:
        hint = ""
        if isinstance(error, ValueError) and "is not comparable" in str(error):  # SymPy's Max/Min of a matrix
            hint = " (SymPy's Max and Min are scalar; for max(x, 0) of a vector use relu from bptt.derive.nodes)"
        if isinstance(error, TypeError) and "Mix of Matrix and Scalar" in str(error):  # c + W, or c + b alone
            hint = (
                " (a scalar c in a sum means c times the ones vector in a column vector's sum that reads a sequence"
                " value, as in W * x() + b + 1; elsewhere write c * OneMatrix(rows, 1), from sympy)"
            )
        raise ModelError(f"{path}:{attr}() failed: {type(error).__name__}: {error}{hint}") from error
    if not isinstance(model, Model):
        raise ModelError(f"{path}:{attr}() returned {type(model).__name__}, expected a bptt.derive.model.Model")
    return dataclasses.replace(model, spec=f"{path}:{attr}")
