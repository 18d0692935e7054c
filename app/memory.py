"""Whether a command's arrays fit in this machine's memory, weighed before any is allocated: an absurd T, B or size
is a usage error naming them, not minutes of swapping or the kernel's out-of-memory killer."""

import math
import os

from bptt.app.guard import UsageError
from bptt.runtime.common import _extent

UNITS = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
MEMINFO = "/proc/meminfo"


def available():
    """The bytes this machine can still give (Linux's MemAvailable), else its physical memory; None if unknown."""
    try:
        with open(MEMINFO, encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # no such name on this system
        return None


def needed(module, steps, batch, sizes, itemsize):
    """At least the bytes one loss_and_grads of a generated module holds, in Python integers (no size overflows
    them): its parameters and their gradients, the inputs, and what its forward pass keeps for backward (CACHE)."""
    dims = dict(sizes, T=steps, B=batch)
    params = sum(math.prod(_extent(dim, sizes) for dim in shape) for shape in module.SHAPES.values())
    cache = sum(math.prod(_extent(dim, dims) for dim in shape) for shape in module.CACHE.values())
    inputs = steps * batch * sizes.get("d", 0) if "x" not in module.CACHE else 0  # else in the cache already
    return itemsize * (2 * params + cache + inputs)


def require_room(module, steps, batch, sizes, itemsize, what):
    """UsageError in one line if `what` (at least one loss_and_grads at T=steps, B=batch and sizes, in arrays of
    itemsize bytes) needs more memory than the machine has available."""
    room, need = available(), needed(module, steps, batch, sizes, itemsize)
    if room is None or need <= room:
        return
    shown = ", ".join([f"T={steps}", f"B={batch}", *(f"{name}={size}" for name, size in sizes.items())])
    raise UsageError(
        f"{shown}: {what} needs at least {in_units(need)}, and this machine has {in_units(room)} available; "
        "give a smaller --steps, --batch or --sizes"
    )


def in_units(count):
    """A count of bytes in words: 3.2 GiB."""
    unit = 0
    while count >= 1024 and unit < len(UNITS) - 1:
        count, unit = count / 1024, unit + 1
    return f"{count:.0f} {UNITS[unit]}" if unit == 0 else f"{count:.3g} {UNITS[unit]}"
