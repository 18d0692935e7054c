"""The NumPy backend as the app sees it (codegen/adapter.py): the reference every other backend is checked and
benchmarked against; its arrays are NumPy's, so the base class's ways are its own."""

from bptt.codegen.adapter import Adapter


class NumPyAdapter(Adapter):
    name, title, suffix, framework, extra = "numpy", "NumPy", "", "numpy", ""
    renderer, runtime = "bptt.codegen.numpy.render", "bptt.runtime.numpy"
    reference = True
    peers = ("naive", "hand")  # app/bench/peers.py: BPTT written by hand, and printed step by step


ADAPTER = NumPyAdapter()
