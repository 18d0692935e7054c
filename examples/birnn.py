"""A bidirectional Elman tagger (the zoo's `birnn`, derive/models/birnn.py), its two-layer stack and
`bidirectional`, which builds them.

Try:  bptt latex examples/birnn.py:birnn --format md
      bptt latex examples/birnn.py:two_layers
"""

from bptt.derive.models.birnn import bidirectional, birnn, two_layers

__all__ = ["bidirectional", "birnn", "two_layers"]
