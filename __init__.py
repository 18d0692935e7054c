"""bptt: backpropagation through time, derived symbolically, printed as LaTeX,
generated as NumPy code and proven.

Installed, the repository's folders are the subpackages `bptt.derive` (the
maths), `bptt.documents` (the derivation as LaTeX and Markdown), `bptt.codegen`
(the statement IR, its passes and one printer per backend), `bptt.app` (the CLI,
checks, analysis, plots, benchmark), `bptt.generated` (the zoo's modules) and
`bptt.runtime` (what a generated module runs besides its model's maths).

"""
