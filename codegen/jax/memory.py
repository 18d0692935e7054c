"""What XLA holds per step of a segment beyond the arrays the derivation sizes (printing/checkpoints.py).

XLA_STEP_FACTOR multiplies a JAX module's bytes of a stored forward step and of a backward step in
_checkpoint_bytes, so that its schedule stores fewer steps for the same budget. Measured with XLA's own
account of a compiled program (`jax.jit(f).lower(...).compile().memory_analysis()`), not with the resident
size: the backward pass's arguments (the forward cache, whose inputs the forward pass returns as copies,
and dL/doutputs), its temporaries (the scan's inputs sliced and stacked, its stacked outputs, dL/dh_t
before the scan) and the segment's outputs, per step, over the generated models at small sizes (the
largest share: see tests/backends/test_checkpoint_estimates.py, which fails if it undercounts)."""

XLA_STEP_FACTOR = 2.5
