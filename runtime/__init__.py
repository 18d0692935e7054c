"""What a generated module runs that is not its model's maths: the option values, argument checks, the
workspace, truncation weights, the checkpoint schedule and its driver. options.py, common.py, checks.py, schedule.py
and checkpoints.py are framework-free; numpy.py, torch.py and jax.py are each backend's (with numpy_padding.py,
numpy_passes.py and their torch and JAX twins). A generated module imports the names it calls from them
(`bptt codegen --standalone` copies those definitions into the module instead)."""
