"""Print the backward pass's statements as JAX code (jax/scan.py prints the forward pass): stacked
statements as one expression over all steps, the loop as the step function of a `jax.lax.scan`. JAX
is functional, so a sequence is never written in place: a stacked statement binds a whole array, and
a step reads its inputs at t (and t-1, t+1) from the scan's stacked inputs, the previous step's values
from the carry.
"""

from dataclasses import dataclass, field
from typing import NamedTuple

from bptt.codegen.array_names import adjoint_array
from bptt.codegen.ir import Accumulate, Assign, Flow, Guard, Loop
from bptt.codegen.jax.printer import JaxPrinter, step_name
from bptt.derive.atoms import atoms
from bptt.derive.nodes import Adj, SeqAt, t


class Carried(NamedTuple):
    """One value a scan carries: its name read at step t, its code after the step, and what it is (the
    state or adjoint node it holds)."""

    name: str
    code: str
    node: object


@dataclass
class Scan:
    """A step function's parts: its body lines, the values it carries and reads, what it returns.

    carry: [Carried]; inputs: [(local name, stacked code)]; outputs: [(array name after the scan, the code
    the step returns)]."""

    body: list
    carry: list = field(default_factory=list)
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)

    def lines(self, doc, carry_init, reverse=False, last="_", blank=True, length=None):
        """The step function and the scan: `carry_init` the first carry, codes in carry order;
        `last` the name of the final carry; blank: a blank line before the step function;
        length: the number of steps, when the step reads no input."""
        head = [""] * blank + ["def _step(carry, inputs):", f'    """{doc}"""']
        if self.carry:
            head.append(f"    {tupled([carried.name for carried in self.carry])} = carry")
        head.append(f"    {tupled([name for name, _ in self.inputs])} = inputs")
        back = f"({tupled([carried.code for carried in self.carry])}, {tupled([code for _, code in self.outputs])})"
        body = head + ["    " + line for line in self.body] + [f"    return {back}"]
        stacked = tupled([code for _, code in self.inputs])
        options = (", reverse=True" if reverse else "") + (f", length={length}" if length else "")
        call = f"jax.lax.scan(_step, {tupled(carry_init)}, {stacked}{options})"
        steps = "t = T..1" if reverse else "t = 1..T"
        return body + ["", f"{last}, {tupled([name for name, _ in self.outputs])} = {call}  # {steps}"]


def tupled(items):
    """A tuple's code: `(a,)`, `(a, b)`, `()`."""
    items = list(items)
    if not items:
        return "()"
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def scanned_input(printer, node, shift, crossings=None):
    """The stacked code whose step t is `node` at t + shift; at t + 1 the last step's value is the next
    segment's (`following`, under its name in crossings: program.checkpoints), none without one."""
    if shift == 1:
        after = f'following.get("{crossings[node]}")' if crossings else "None"
        return f"{printer.helper('_following')}({printer.at(True)(node.subs(t, t - 1))}, {after})"
    return str(printer.at(True)(node))


@dataclass
class BackwardScan:
    scan: Scan
    carried: list  # adjoint names whose step-1 value the final carry holds
    rows: dict  # {adjoint name: rows} of every adjoint the step computes (a group's too)


def backward_scan(printer, loop, wanted, initial_reads, local, crossings, groups=()):
    """The backward recursion as a Scan, last step first. wanted: adjoint arrays read after the loop;
    initial_reads: names of the adjoints that dL/dS_0 reads at step 1; local: names of the adjoints
    whose local terms were computed for all steps before the loop; crossings: {value at t+1: its name}
    where a segment of steps reads it from the next one; groups: the Arrays of the gates' adjoints side by
    side (their flows are one product with the stacked weights), each bound in the step after its members."""
    step = JaxPrinter(stacked=False, arrays=printer.arrays)
    step.used = printer.used
    body, targets, zero = [], {}, []
    statements = list(_flatten(loop.body))
    joins = _Joins(step, groups, statements)
    body += joins.ready(targets, 0)
    for done, statement in enumerate(statements, 1):
        seq = statement.target.of
        name = step_name(statement.target, 0)
        code = step(statement.value)
        if isinstance(statement, Assign):
            body.append(f"{name} = {code}  # {statement.comment}")
        elif isinstance(statement, Accumulate):
            body.append(f"{name} = {step(statement.target)} + {code}  # {statement.comment}")
        elif isinstance(statement, Flow):
            if name not in step.assigned and seq.name not in local:
                zero.append((name, seq.rows))
                step.assigned.add(name)
            flow = f"{step.helper('_flow')}({code}, keep_t, ages)"
            body.append(f"{name} = {step(statement.target)} + {flow}  # {statement.comment}")
        step.assigned.add(name)
        targets.setdefault(seq.name, statement.target)
        body += joins.ready(targets, done)
    fresh = [
        f"{local} = {step.helper('_fresh')}({local}, ages)  # computed outside the loop: at age 0 in a window"
        for local, (node, shift) in step.reads.items()
        if isinstance(node, Adj) and (shift == 0 or node.of.name not in targets)
    ]
    step.used.sizes |= {"B", "dtype"} if zero else set()
    starts = [f"{local} = {step.helper('_fresh')}(jnp.zeros((B, {step(rows)}), dtype), ages)" for local, rows in zero]
    scan = Scan(fresh + starts + body)
    carried = []
    for local, (node, shift) in step.reads.items():
        if shift == 1 and isinstance(node, Adj) and node.of.name in targets:
            scan.carry.append(Carried(local, step_name(node, 0), node))
            carried.append(node.of.name)
        else:
            scan.inputs.append((local, scanned_input(step, node, shift, crossings)))
    for name in initial_reads:
        if name in targets and name not in carried:
            scan.carry.append(Carried(step_name(targets[name], 1), step_name(targets[name], 0), targets[name]))
            carried.append(name)
    scan.inputs.append(("keep_t", "keep_next"))
    total = step.helper("_total")
    scan.outputs = [
        (adjoint_array(name), f"{total}({step_name(target, 0)}, ages)")
        for name, target in targets.items()
        if adjoint_array(name) in wanted
    ]
    return BackwardScan(scan, carried, {name: target.of.rows for name, target in targets.items()})


class _Joins:
    """Each group's adjoint at t, its members side by side (`_d_i_f_t = jnp.concatenate((d_i_t, d_f_t), axis=-1)`),
    bound once the step has written every member it computes for the last time (a member assigned, then added
    to by a flow, joins with the flow; the others are scanned in)."""

    def __init__(self, step, groups, statements):
        self.step = step
        self.last = {s.target.of.name: k for k, s in enumerate(statements, 1)}  # each target's last write
        self.waiting = list(groups)

    def ready(self, targets, done):
        """The lines binding the groups whose members' last writes are among the first `done` statements;
        each added to targets."""
        lines = []
        for group in list(self.waiting):
            nodes = [Adj(SeqAt(_of_array(name), t, rows, "intermediate")) for name, rows in group.members]
            if any(self.last.get(n.of.name, 0) > done for n in nodes):
                continue
            self.waiting.remove(group)
            node = Adj(SeqAt(_of_array(group.name), t, group.rows, "intermediate"))
            parts = tupled(str(self.step(n)) for n in nodes)
            code = f"jnp.concatenate({parts}, axis=-1)"
            lines.append(f"{step_name(node, 0)} = {code}  # the gates' adjoints side by side")
            self.step.assigned.add(step_name(node, 0))
            targets[node.of.name] = node
        return lines


def _of_array(name):
    """The sequence name of an adjoint's array: `h` of `d_h`, `_x` of `_d_x` (array_names.adjoint_array)."""
    return name[2:]


def _flatten(statements):
    for statement in statements:
        if isinstance(statement, (Loop, Guard)):
            yield from _flatten(statement.body)
        else:
            yield statement


def initial_code(printer, item, carried):
    """dL/dS_0 from the final carry: the flow from step 1 (weighted, one age older) summed over the ages;
    printer: the scan's (its arrays and the helpers used)."""
    aged = {a.of.name for a in atoms(item.value, Adj)} & set(carried)
    initial = JaxPrinter(stacked=False, arrays=printer.arrays, carried=carried, aged=bool(aged))
    initial.used = printer.used
    code = str(initial(item.value))
    if item.weighted:
        code = f"{initial.helper('_flow')}({code}, keep_0, {'ages' if aged else 'None'})"
    if aged:
        code = f"{initial.helper('_total')}({code}, ages)"
    return f"d_{item.key} = {code}  # {item.comment}"
