"""Clipping by the global norm (Pascanu et al., 2013) in an analysis: its threshold g_max, the documents' name for
it, chosen from the measured norms unless given, so that the plot shows a norm clipped and a norm left alone."""

import math

import numpy as np

from bptt.app.analysis.table import Table


def global_norm(grads):
    return math.sqrt(sum(float(np.sum(g**2)) for g in grads.values()))


def chosen_g_max(norms):
    """The geometric mean of the smallest and the largest norm: strictly between them when they differ, so that the
    largest is clipped and the smallest left alone (on a log axis, halfway)."""
    return math.sqrt(min(norms) * max(norms))


def clipping_table(module, gradients, g_max, regime):
    """Rows (radius, global norm, norm after clip_grads at g_max, g_max) for {radius: the module's gradients};
    g_max None: chosen_g_max of the norms."""
    norms = {radius: global_norm(grads) for radius, grads in gradients.items()}
    chosen = g_max is None
    g_max = chosen_g_max(list(norms.values())) if chosen else g_max
    rows = [
        (radius, norms[radius], global_norm(module.clip_grads(grads, g_max)), g_max)
        for radius, grads in gradients.items()
    ]
    how = ", between the smallest and the largest norm" if chosen else ""
    return Table(
        "clipping",
        f"Global gradient norm before and after clipping at g_max = {g_max:.3g}{how} ({regime})",
        ("radius", "norm", "clipped", "g_max"),
        rows,
        ("spectral radius", "before clipping", "after clipping", r"threshold $g_{\max}$"),
        regime=regime,
    )
