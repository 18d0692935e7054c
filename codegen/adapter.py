"""What the app needs of a backend besides its printed module: one Adapter object per backend folder
(`codegen/<backend>/adapter.py:ADAPTER`), registered in codegen/backends.py.

It names the backend (its name, title, file suffix, framework, pip extra, render module) and says how the app
hands the framework's arrays around: NumPy arrays in and out, a jit, its random numbers, when a result is
computed, and what bench and check may expect of it. This base class is NumPy's way of doing each (a backend
on NumPy arrays overrides nothing of it); the framework is imported only when one of these is called, so
codegen still works without it.
"""

import importlib
import importlib.util


class MissingFramework(ImportError):
    """A backend's framework is not installed: a one-line error naming the extra that brings it."""


class Adapter:
    name = ""  # what --backend takes
    title = ""  # its name in words: NumPy, torch, JAX
    suffix = ""  # generated/<model><suffix>.py
    framework = "numpy"  # what the generated module imports
    extra = ""  # pip install 'bptt[extra]' brings the framework ("" for a dependency)
    renderer = ""  # the module whose module_source(model, program, standalone) prints the backend's module
    runtime = ""  # the runtime module its generated modules import (bptt.runtime.<...>)
    reference = False  # the backend every other one is checked and benchmarked against (one: NumPy)
    peers = ()  # bench's peers of this backend's own folder's kind (NumPy's hand-written ones: naive, hand)
    peer = None  # the dotted module of bench's peer written in this framework (available, supports, prepare)
    numpy_arrays = True  # its arrays are NumPy's: tracemalloc sees what a call allocates
    traced = False  # a jit traces its loops: bench counts operations traced per step, not calls made
    compiles = False  # its first call at a sequence length compiles (a budget's memory is that of the second)
    model_class = False  # its modules define Model (a framework module holding the parameters)

    def load(self):
        """The framework's module, or MissingFramework naming the extra that brings it."""
        try:
            return importlib.import_module(self.framework)
        except ImportError as error:
            raise self._missing() from error

    def installed(self):
        """MissingFramework naming the extra unless the framework is installed; found, not imported (torch's or
        JAX's import takes seconds)."""
        if importlib.util.find_spec(self.framework) is None:
            raise self._missing()

    def _missing(self):
        return MissingFramework(
            f"the {self.name} backend needs {self.framework}, which is not installed: pip install 'bptt[{self.extra}]'"
        )

    def prepare(self):
        """Set the framework up as check and bench run it (float64 enabled); once per process is enough."""

    def single_thread(self):
        """Make the framework compute on one thread (bench measures so)."""

    def to_framework(self, value):
        """A NumPy array (or a dict of them, or a tuple of either) as the framework's, dtype kept."""
        if isinstance(value, dict):
            return {key: self.to_framework(item) for key, item in value.items()}
        if isinstance(value, tuple):
            return tuple(self.to_framework(item) for item in value)
        return self.array(value)

    def array(self, value):
        """One NumPy array as the framework's."""
        return value

    def to_numpy(self, value):
        """The framework's arrays (in a dict) as NumPy arrays."""
        if isinstance(value, dict):
            return {key: self.to_numpy(item) for key, item in value.items()}
        return self.numpy(value)

    def numpy(self, value):
        """One of the framework's arrays as a NumPy array."""
        import numpy as np

        return np.asarray(value)

    def jit(self, function, static=()):
        """function compiled as a training step would run it (static: the names of arguments that are not arrays)."""
        return function

    def ready(self, result):
        """result, computed to the end (a framework that dispatches asynchronously waits here)."""
        return result

    def draws(self, seed, steps):
        """(the generator a module takes as rng, seeded with seed; the `steps` uniforms, as NumPy, that randomized
        truncation draws from it)."""
        import numpy as np

        return np.random.default_rng(seed), np.random.default_rng(seed).random(steps)

    def uniforms(self, generator, steps):
        """The `steps` uniforms, as NumPy, that randomized truncation draws from a generator a module made."""
        return generator.random(steps)

    def generator(self, seed):
        """The generator a module's init_params and random_inputs take, seeded."""
        import numpy as np

        return np.random.default_rng(seed)

    def dtype(self, name):
        """The framework's dtype of that name (float32, float64)."""
        return name
