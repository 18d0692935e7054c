"""forward_mode_grads for the JAX backend: the Program's forward-mode statements, each TangentLoop printed
as a `jax.lax.scan` whose carry holds the tangents and whose outputs are each step's share of the gradient.

Tangents are carried for every direction of one parameter at once, an array (P, B, n) for P the
parameter's size, as in the NumPy module."""

from bptt.codegen.array_names import tangent_array, units_name
from bptt.codegen.ir import Assign, Contract, EntersStepOne
from bptt.codegen.jax.printer import JaxPrinter
from bptt.codegen.jax.statements import Carried, Scan, scanned_input
from bptt.codegen.printing.tangents import TangentPrinter


class JaxTangentPrinter(TangentPrinter, JaxPrinter):
    """Tangents in row form with a leading axis of directions; values at t read as in a scan's step."""

    def zeros(self, shape):
        self.used.sizes |= {"B", "dtype"}
        return f"jnp.zeros({shape}, dtype)"

    def ones(self, shape):
        self.used.sizes |= {"B", "dtype"}
        return f"jnp.ones({shape}, dtype)"

    def einsum(self, spec, *operands):
        return f'jnp.einsum("{spec}", {", ".join(operands)})'

    def _print_TangentLoop(self, loop):
        """The loop as a scan: the tangents a step updates in the carry, the others bound before it."""
        self.reads, self.assigned = {}, set()
        self.begin(loop)
        size = self.directions(loop)
        states = {a.state.name for a in loop.arrays}
        updated = {s.target.of.name: s.target for s in loop.body if isinstance(s, Assign) and s.target.of.name in states}
        out = ["", f"# {loop.comment}"]
        out += [f"{tangent_array(a.state)} = {self.start(a, size)}" for a in loop.arrays if a.state.name not in updated]
        scan = Scan([])
        for statement in loop.body:
            if isinstance(statement, Contract):
                scan.outputs.append(("shares", self.contraction(statement)))
            else:
                scan.body += self._print(statement)
        scan.carry = [Carried(tangent_array(node.of), tangent_array(node.of), node) for node in updated.values()]
        scan.inputs = [(local, scanned_input(self, node, shift)) for local, (node, shift) in self.reads.items()]
        if any(isinstance(s, EntersStepOne) for s in loop.body):
            self.used.sizes.add("T")
            scan.inputs.append(("t", "jnp.arange(1, T + 1)"))
        starts = {a.state.name: self.start(a, size) for a in loop.arrays}
        doc = f"The tangents at t from those at t-1, and step t's share of the gradient of {loop.key}."
        out += scan.lines(doc, [starts[s] for s in updated], blank=False)
        total = "shares.sum(axis=0)" + ("" if loop.per_sample else f".reshape({loop.key}.shape)")
        return out + [f'grads["{loop.key}"] = {total}']

    def _print_EntersStepOne(self, statement):
        units = units_name(statement.state.rows)
        return [f"{tangent_array(statement.state)} = jnp.where(t == 1, {units}, 0)  # {statement.comment}"]


def rtrl_lines(program):
    """(the lines of the forward-mode statements, the printer's record of what they read)."""
    printer = JaxTangentPrinter(stacked=False)
    return printer.lines(program.forward_mode.statements), printer
