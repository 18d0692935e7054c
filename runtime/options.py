"""The options of a generated module's calls as values, each defined here once: Truncation (truncate=),
Checkpoints (checkpoints=) and Lengths (the CLI's --lengths; a call's lengths= is checked by _lengths_error),
made from the API's tuples and strings at the start of a call (of) or from the CLI's text (parse), checked, and
described in words. Framework-free; the one module that spells the modes."""

import numbers
from typing import NamedTuple

# Truncation's modes (public names below)
_FULL = "full"
_WINDOW = "window"
_CHUNK = "chunk"
_RANDOM = "random"
_EVERY_STEP = "T"  # --lengths T: every sequence's length is T
_UNITS = {  # bytes
    **{"B": 1, "kB": 10**3, "KiB": 2**10, "MB": 10**6, "MiB": 2**20},
    **{"GB": 10**9, "GiB": 2**30, "TB": 10**12, "TiB": 2**40},
}


class _Truncation(NamedTuple):
    """How backward truncates the gradient's flow: FULL (value None), WINDOW or CHUNK (value k, a length of
    steps >= 1) or RANDOM (value pi, the probability a flow is kept). A tuple: (mode, value), so the value
    of a truncation is also a truncate argument. With reverse-time states each recursion is truncated in its own
    direction (sweeps.py: each group's backward over its own steps): a reverse state's chunks count from each
    sequence's last step, a window counts each recursion's own k steps, random weights are drawn per group."""

    mode: str
    value: object = None

    @classmethod
    def of(cls, truncate):
        """The truncation a truncate argument says (None: full BPTT), or ValueError saying what is allowed."""
        if truncate is None or (isinstance(truncate, _Truncation) and truncate.full):
            return _NO_TRUNCATION
        modes = (_WINDOW, _CHUNK, _RANDOM)
        if not (isinstance(truncate, tuple) and len(truncate) == 2 and truncate[0] in modes):
            raise ValueError(f"truncate must be None, ('window', k), ('chunk', k) or ('random', pi); got {truncate!r}")
        mode, value = truncate
        if mode != _RANDOM and not _is_count(value):
            raise ValueError(f"truncate=('{mode}', k): k must be an integer >= 1, got {value!r}")
        if mode == _RANDOM:
            if not (_is_number(value) and 0 < value <= 1):
                raise ValueError(f"truncate=('random', pi): pi must be in (0, 1], got {value!r}")
            return cls(_RANDOM, float(value))
        return cls(modes[modes.index(mode)], int(value))  # a NumPy integer too, as a Python int

    @classmethod
    def parse(cls, text):
        """The truncation of the CLI's text window:K, chunk:K or random:PI, or ValueError in one line."""
        mode, _, value = text.partition(":")
        try:
            if mode in (_WINDOW, _CHUNK):
                return cls.of((mode, int(value)))
            if mode == _RANDOM:
                return cls.of((mode, float(value)))
        except ValueError:
            pass
        raise ValueError(f"expected window:K or chunk:K with K >= 1, or random:PI with 0 < PI <= 1; got {text!r}")

    @property
    def full(self):
        return self.mode == _FULL

    @property
    def windowed(self):
        return self.mode == _WINDOW

    @property
    def chunked(self):
        return self.mode == _CHUNK

    @property
    def randomized(self):
        return self.mode == _RANDOM

    @property
    def weighted(self):
        """Chunks and random truncation weight each step's flow (keep weights); full BPTT and windows don't."""
        return self.mode in (_CHUNK, _RANDOM)

    @property
    def ages(self):
        """How many steps' states each step's backward reads: a window's k + 1, else 1."""
        return self.value + 1 if self.mode == _WINDOW else 1

    @property
    def argument(self):
        """The truncate argument of a generated module's calls: None or (mode, value)."""
        return None if self.mode == _FULL else (self.mode, self.value)

    def text(self):
        """The CLI's text (parse reads it back); full BPTT has none: None."""
        return None if self.mode == _FULL else f"{self.mode}:{self.value}"

    def describe(self):
        """In words, for a report."""
        if self.mode == _WINDOW:
            return f"each output's gradient flows back at most {self.value} steps"
        if self.mode == _CHUNK:
            return f"the gradient is cut every {self.value} steps (chunks of {self.value})"
        if self.mode == _RANDOM:
            return f"each step's flow is kept with probability {self.value} and scaled by 1/{self.value}"
        return "full BPTT"


_NO_TRUNCATION = _Truncation(_FULL)  # full BPTT, made once: most calls ask for it


class _Checkpoints(NamedTuple):
    """A memory bound on backward: a number of slots (a kept state or a stored step each), or a byte budget
    (bytes, as the user spelled it: spelled)."""

    slots: int | None = None
    bytes: int | None = None
    spelled: str | None = None

    @classmethod
    def of(cls, checkpoints):
        """The bound of a checkpoints argument: a positive integer (slots) or a byte budget such as "32MiB",
        else ValueError in one line. Only parsed: as cheap for a terabyte as for a byte."""
        if isinstance(checkpoints, _Checkpoints):
            return checkpoints
        if _is_count(checkpoints):
            return cls(slots=int(checkpoints))
        budget = _bytes(checkpoints) if isinstance(checkpoints, str) else None
        if budget is None:
            raise ValueError(
                f"checkpoints must be a positive integer (slots) or a byte budget such as '32MiB', got {checkpoints!r}"
            )
        return cls(bytes=budget, spelled=checkpoints)

    @classmethod
    def parse(cls, text):
        """The bound of the CLI's text: digits are slots, anything else a byte budget."""
        return cls.of(int(text) if text.strip().isdigit() else text)

    @property
    def argument(self):
        """The checkpoints argument of a generated module's calls: slots, or the budget as spelled."""
        return self.slots if self.bytes is None else self.spelled

    def text(self):
        return str(self.argument)

    def budget(self, state_bytes, step_bytes):
        """(budget, kept state, stored step) in one unit, the schedule's capacities' first arguments: slots
        count one each; a byte budget weighs them as given; ValueError in one line if it holds no step."""
        if self.bytes is None:
            return self.slots, 1, 1
        if self.bytes < step_bytes:
            raise ValueError(
                f"checkpoints={self.spelled!r} holds no step: one stored step takes {step_bytes} bytes here "
                f"(a kept state {state_bytes})"
            )
        return self.bytes, state_bytes, step_bytes

    def describe(self):
        """In words, for a report."""
        if self.bytes is None:
            return f"{self.slots} slots (a kept state or a stored step each)"
        return f"a budget of {self.spelled.strip()} ({self.bytes} bytes)"


class _Lengths(NamedTuple):
    """The CLI's --lengths: each sequence's own steps in a right-padded batch (steps, 1 <= steps[b] <= T), every
    one T (full: nothing padded), or drawn at random from 1..T (neither). A module's lengths= argument is checked
    by _lengths_error."""

    steps: tuple | None = None
    full: bool = False

    @classmethod
    def parse(cls, text):
        """The lengths of the CLI's text: integers from 1 to _LONGEST such as 5,3,1, T (every sequence T steps) or
        random; else ValueError in one line."""
        if text.strip() in (_RANDOM, _EVERY_STEP):
            return cls(full=text.strip() == _EVERY_STEP)
        parts = [part.strip() for part in text.split(",")]
        if len(parts) > 4096 or not all(_is_length(part) for part in parts):
            raise ValueError(
                f"expected --lengths as integers from 1 to {_LONGEST} such as 5,3,1 (one per sequence), T or random; "
                f"got {text!r}"
            )
        return cls(tuple(int(part) for part in parts))

    @property
    def random(self):
        return self.steps is None and not self.full

    def batch(self, default):
        """The batch's size: one sequence per given length, else default (--batch)."""
        return default if self.steps is None else len(self.steps)

    def disagrees(self, batch):
        """Why given lengths do not match a --batch given too, in one line (the CLI's words); None if they do."""
        if self.steps is not None and batch is not None and batch != len(self.steps):
            return (
                f"--batch {batch} and --lengths {self.text()} disagree: the lengths give the batch, one per "
                f"sequence ({len(self.steps)}); give --batch {len(self.steps)} or leave it out"
            )
        return None

    def above(self, T):
        """Why a given length does not fit T steps, in one line (the CLI's words); None if every one fits."""
        if self.steps is not None and max(self.steps) > T:
            return f"--lengths {self.text()}: a length is above T={T}; give --steps {max(self.steps)}"
        return None

    def draw(self, rng, T, B):
        """The lengths of a batch of B sequences of at most T steps (random ones drawn from rng): a NumPy array when
        drawn, else a list of ints."""
        if self.random:
            return rng.integers(1, T + 1, size=B)
        return [T] * B if self.full else list(self.steps)

    def text(self):
        if self.steps is None:
            return _EVERY_STEP if self.full else _RANDOM
        return ",".join(map(str, self.steps))

    def describe(self):
        """In words, for a report."""
        if self.full:
            return "every sequence of T steps (nothing padded)"
        if self.steps is None:
            return "each sequence's length drawn from 1..T"
        return f"sequences of lengths {self.text()}"


_LONGEST = 10**9 - 1  # a length of fewer than ten digits: parsing one never takes longer


def _is_length(text):
    """text is an integer from 1 to _LONGEST in ASCII digits."""
    return text.isascii() and text.isdigit() and len(text) <= len(str(_LONGEST)) and int(text) > 0


def _lengths_error(shape, dtype, integral, low, high, T, B):
    """Why a lengths argument (its shape, dtype, whether that is an integer dtype, its least and largest entry)
    does not fit a batch of T steps and B sequences, in one line; None if it fits, or if T < 1 (no lengths fit:
    the arrays' own check names the array without steps)."""
    if T < 1:
        return None
    if not integral:
        return f"lengths must be an integer array of shape (B,)=({B},), one length per sequence; got dtype {dtype}"
    if tuple(shape) != (B,):
        return f"lengths has shape {tuple(shape)}; expected (B,)=({B},), one length per sequence"
    for value in (low, high):
        if not 1 <= value <= T:
            return f"lengths holds {value}; each sequence's length must be in 1..T (T={T})"
    return None


_LAST = "last"  # at="last": the loss reads each sequence's last step only


def _loss_at(at):
    """at, the steps a loss reads: None (every step of each sequence's own) or "last" (its last step only);
    else ValueError in one line."""
    if at is not None and not (isinstance(at, str) and at == _LAST):
        raise ValueError(
            f"at must be None (the loss of every step) or 'last' (of each sequence's last step); got {at!r}"
        )
    return at


def _bytes(text):
    """The bytes of a budget written as a positive integer and a unit (B, kB, KiB, ..., TB, TiB), else None."""
    text = text.strip()
    digits = len(text) - len(text.lstrip("0123456789"))
    number, unit = text[:digits], text[digits:].strip()
    if not number or unit not in _UNITS or len(number) > 4000 or int(number) == 0:
        return None  # (int() refuses over 4300 digits)
    return int(number) * _UNITS[unit]


def _is_number(value):
    """A real number: a Python or NumPy int or float (a bool is not a number here)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_count(value):
    """An integer >= 1, Python's or NumPy's (a bool is not a count)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 1


# The public names, what the CLI, derive, codegen and users read. The runtime's own code reads the private
# ones, so a standalone module, which carries the definitions its code reads, has no public name of them.
Truncation = _Truncation
Checkpoints = _Checkpoints
Lengths = _Lengths
FULL = _FULL
WINDOW = _WINDOW
CHUNK = _CHUNK
RANDOM = _RANDOM
