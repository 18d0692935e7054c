"""`bptt analyze`'s defaults, which the command line shows before the analysis is loaded."""

STEPS = 40  # the sequence's length
SIZE = 8  # every size of the model (d, h, q, ...)
RADII = (0.5, 1.0, 1.5)  # the spectral radii the recurrent weights are scaled to
