"""A generated module of groups of steps (runtime/sweeps.py) run forward as the check runs it: hundreds of times, where
most of a wide pass's changes leave a group's arguments as they were at the last call (the changes of a chunk sit in a
few arrays, of one group or two; birnn's forward group reads none of its backward group's). A group called with the
arguments of its last call, bit for bit, gives that call's (outputs, cache) again, not computed again.

As in trusted.py, the public forward checks the arguments of the first call of a kind (module, shapes, dtype), and
the groups run from the check's arrays only if their outputs and cache then are the public forward's bit for bit;
else every call runs the public forward. Only a module without lengths and fed targets is run so (xs alone)."""

import numpy as np


def remembering(composed):
    """A copy of the module's groups (its _SWEEPS) whose run_forward remembers each group's last call."""

    class Remembering(type(composed)):
        def run_forward(self, passes, params, data, states, lengths, options):
            arguments = _fingerprint((params, data, states, lengths, options))
            last = self.__dict__["_last"].get(id(passes))
            if last is not None and last[0] == arguments:
                return last[1]
            found = super().run_forward(passes, params, data, states, lengths, options)
            self.__dict__["_last"][id(passes)] = (arguments, found)
            return found

    copy = Remembering.__new__(Remembering)
    copy.__dict__.update(composed.__dict__)
    copy.__dict__["_last"] = {}
    return copy


def forward(remembered, params, xs, initial):
    """(outputs, cache) of the module's forward pass by its remembering groups (the arguments not checked again)."""
    states = tuple(initial.get(name) for name in remembered.spec.states)
    return remembered._forward(params, xs, states, None, {})


def _fingerprint(value):
    """What a group's arguments hold, comparable with ==: each array's dtype, shape and bytes (so -0.0 is not 0.0)."""
    if isinstance(value, np.ndarray):
        return value.dtype.str, value.shape, value.tobytes()
    if isinstance(value, dict):
        return tuple((key, _fingerprint(item)) for key, item in value.items())
    if isinstance(value, (tuple, list)):
        return tuple(_fingerprint(item) for item in value)
    return value
