"""forward_mode_grads for the JAX backend: real-time recurrent learning from the blocks of
codegen/forward_mode.py, each parameter's tangents carried forward through a `jax.lax.scan`.

Tangents are carried for every direction of one parameter at once, an array (P, B, n) for P
the parameter's size, as in the NumPy module; each step adds its share of the gradient."""

from bptt.derive.tangent import Tangent

from .forward_mode import TangentPrinter, blocks
from .jax_printer import JaxPrinter
from .jax_statements import Carried, Scan, scanned_input
from .numpy_printer import Code
from .text import text


class JaxTangentPrinter(TangentPrinter, JaxPrinter):
    """Tangents in row form with a leading axis of directions; values at t read as in a scan's step."""

    def directions(self, rows):
        self.used["sizes"] |= {"B", "dtype"}
        return Code(f"{self.helper('_directions')}(jnp.ones((B, 1), dtype), {self(rows)})")


def lines(model, output):
    """(lines of _forward_mode after the forward pass, the printer's record of what they read)."""
    printer = JaxTangentPrinter(stacked=False)
    out = []
    for block in blocks(model):
        out += block_lines(printer, block, output)
    return out, printer


def block_lines(printer, block, output):
    """One parameter's (or initial state's) scan: its tangents in the carry, the gradient's share out."""
    printer.reads = {}
    printer.assigned = set()
    size = printer(block.wrt.rows) if block.per_sample else f"{printer(block.wrt)}.size"
    per = ", for each sample" if block.per_sample else ""
    out = ["", f"# {block.key}: tangents along every entry of {block.key}{per}"]
    updated = [s for s, _ in block.updates]
    body = []
    if block.per_sample and block.forced:
        out.append(f"first = {printer.directions(block.wrt.rows)}")
        body.append(f"dot_{block.wrt.name} = jnp.where(t == 1, first, 0)  # {text(Tangent(block.wrt(0)))} enters step 1 only")
    for s in block.zero:
        if s not in updated:
            out.append(f"dot_{s.name} = jnp.zeros(({size}, B, {printer(s.rows)}), dtype)")
    if block.updates:
        names = ", ".join(f"dot_{s.name}" for s in updated)
        codes = ", ".join(str(printer(value)) for _, value in block.updates)
        comment = "; ".join(f"{text(Tangent(s()))} = {text(value)}" for s, value in block.updates)
        body.append(f"{names} = {codes}  # {comment}")
    contract = "bp" if block.per_sample else "p"
    share = f'jnp.einsum("pbk,bk->{contract}", {printer(block.outputs)}, {output}_t)'
    scan = Scan(body)
    scan.carry = [Carried(f"dot_{s.name}", f"dot_{s.name}", s) for s in updated]
    scan.inputs = [(local, scanned_input(printer, node, shift)) for local, (node, shift) in printer.reads.items()]
    scan.inputs.append((f"{output}_t", output))
    if block.per_sample and block.forced:
        scan.inputs.append(("t", "jnp.arange(1, T + 1)"))
    scan.outputs = [("shares", share)]
    first = [
        str(printer.directions(s.rows)) if block.per_sample and s.name == block.wrt.name and not block.forced
        else f"jnp.zeros(({size}, B, {printer(s.rows)}), dtype)"
        for s in updated
    ]
    printer.used["sizes"] |= {"B", "dtype"} | ({"T"} if block.forced else set())
    doc = f"The tangents at t from those at t-1, and step t's share of the gradient of {block.key}."
    out += scan.lines(doc, first, blank=False)
    total = "shares.sum(axis=0)" + ("" if block.per_sample else f".reshape({block.key}.shape)")
    return out + [f'grads["{block.key}"] = {total}']
