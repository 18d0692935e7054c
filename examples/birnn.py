"""A bidirectional Elman tagger (the zoo's `birnn`, derive/models/birnn.py) and its two-layer stack.

Try:  bptt latex examples/birnn.py:birnn --format md
      bptt latex examples/birnn.py:two_layers
"""

from bptt.derive.models.birnn import birnn, two_layers

__all__ = ["birnn", "two_layers"]
