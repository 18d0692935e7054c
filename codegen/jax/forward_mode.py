"""forward_mode_grads for the JAX backend: the Program's forward-mode statements, the TangentLoop printed as
a `jax.lax.scan` whose carry holds the states' tangents and whose output is each step's share of every
gradient.

The tangents are carried along the directions of every gradient at once, an array (P, B, n), as in the
NumPy module; JAX is functional, so a local term goes into its rows as `dot_a.at[along_W].add(...)`."""

from bptt.codegen.array_names import tangent_array
from bptt.codegen.jax.arrays import value_arrays
from bptt.codegen.jax.printer import SPELLING, scan_read
from bptt.codegen.jax.statements import Carried, Scan, scanned_input
from bptt.codegen.printing.tangents import TangentPrinter


class JaxTangentPrinter(TangentPrinter):
    """Tangents in row form with a first axis of directions; values at t read as in a scan's step (as
    jax/printer.py's JaxPrinter reads them: scan_read)."""

    spelling = SPELLING
    carried, aged = frozenset(), False  # no adjoint is read

    def __init__(self, stacked=False, arrays=None):
        super().__init__(stacked=stacked, arrays=arrays)
        self.reads, self.assigned = {}, set()

    def sequence(self, node):
        return scan_read(self, node, super().sequence)

    def zeros(self, shape):
        self.used.sizes |= {"B", "dtype"}
        return f"jnp.zeros({shape}, dtype)"

    def ones(self, shape):
        self.used.sizes |= {"B", "dtype"}
        return f"jnp.ones({shape}, dtype)"

    def einsum(self, spec, *operands):
        return f'jnp.einsum("{spec}", {", ".join(operands)})'

    def fresh(self, code):
        return code  # a JAX array is never written in place

    def pad_columns(self, code, before, after):
        return f"jnp.pad({code}, ((0, 0), ({before}, {after})))"

    def add_into(self, target, rows, value):
        return f"{target} = {target}.at[{rows}].add({value})"

    def set_into(self, target, rows, value):
        return f"{target} = {target}.at[{rows}].set({value})"

    def _print_TangentLoop(self, loop):
        """The loop as a scan: the states' tangents in the carry, each step's total its output."""
        self.reads, self.assigned = {}, set()
        self.begin(loop)
        out = self.head(loop)
        total = out.pop()  # the total's zeros start every step
        scan = Scan([total.partition("  #")[0]] + self.lines(loop.body))
        scan.carry = [Carried(tangent_array(a.state), tangent_array(a.state), a.state) for a in loop.arrays]
        scan.inputs = [(local, scanned_input(self, node, shift)) for local, (node, shift) in self.reads.items()]
        scan.outputs = [("shares", "total")]
        doc = "The tangents at t from those at t-1, and step t's share of every gradient."
        out += scan.lines(doc, [tangent_array(a.state) for a in loop.arrays])
        return out + ["total = shares.sum(axis=0)  # every gradient, per sample: its rows along it"]


def rtrl_lines(program):
    """(the lines of the forward-mode statements, the printer's record of what they read)."""
    printer = JaxTangentPrinter(stacked=False, arrays=value_arrays(program.forward.arrays))
    return printer.lines(program.forward_mode.statements), printer
