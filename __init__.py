"""bptt: backpropagation through time, derived symbolically, printed as LaTeX,
generated as NumPy code and proven.

Installed, the repository's folders are the subpackages `bptt.derive` (the
maths), `bptt.codegen` (printers, templates, the CLI) and `bptt.generated`
(the zoo's NumPy modules).
"""
