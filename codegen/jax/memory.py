"""What XLA holds per step of a segment beyond the arrays the derivation sizes (printing/checkpoints.py).

XLA_STEP_FACTOR multiplies a JAX module's bytes of a stored forward step and of a backward step in
_checkpoint_bytes (the derivation's arrays, dL/doutputs and the forward cache's copy of the inputs), so
that its schedule stores fewer steps for the same budget. Measured with XLA's own account of the compiled
backward pass (`jax.jit(f).lower(...).compile().memory_analysis()`: its arguments, temporaries and
outputs, plus the segment's outputs), per step: the scan's inputs sliced and stacked, its stacked outputs
and dL/dh_t before the scan are temporaries the derivation does not hold. Over the generated models (d, h,
q = 2, 3, 4) at most 1.63 times the counted arrays (linear; Elman 1.54, LSTM 1.06); Elman at d = q = 16,
h = 64 (app/bench/budgets.py) 1.8. tests/backends/test_checkpoint_estimates.py fails if it undercounts."""

XLA_STEP_FACTOR = 2
