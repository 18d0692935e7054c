"""Print a pass of ir statements (program.forward) functionally, as JAX code: the NumPy module's
statements, arrays and stacks, without writing in place (JAX arrays are immutable).

Each array of the pass is one variable holding the steps its ir.Array says (jax/arrays.py). A statement for
all steps binds it whole (`n = b_in + x @ W_in.T`), parts of a group assigned in turn are one concatenation,
and a later part is written as `g = g.at[:, ..., a:b].set(...)` (an Accumulate `.add(...)`). A member is read
through a view of its group (`f = _i_f_o_g[..., n_h:2 * n_h]`), bound where it is read and again after its
group changes. The Loop is a `jax.lax.scan`: at step t each array it writes is a local (`_i_f_o_g_t`: the
scanned steps of what was written before the loop, then rewritten), the carry holds those the next step
reads at t-1 (`h_prev`), and the scan's outputs are the arrays' steps 1..T as they are. An array of steps
0..T (a state) is held as its steps 1..T until a statement reads another step, or the pass ends: then its
initial value is concatenated first, so no array of T+1 steps is built around the scan (jax/held.py).
"""

import sympy as sp

from bptt.codegen.ir import Array, Assign, Steps
from bptt.codegen.jax.arrays import places, value_arrays
from bptt.codegen.jax.held import HeldSteps
from bptt.codegen.jax.printer import JaxPrinter
from bptt.codegen.jax.statements import Carried, Scan, scanned_input
from bptt.codegen.printing.code import tuple_items
from bptt.codegen.printing.printer import Code, PrintError, RowPrinter
from bptt.codegen.printing.terms import ones
from bptt.derive.atoms import atoms
from bptt.derive.elementwise import Apply
from bptt.derive.nodes import SeqAt, t, time_shift


class PassPrinter(HeldSteps, JaxPrinter):
    """The statements of a Pass as JAX lines (`lines`); at one step (stacked=False) inside a scan's step.

    arrays: the pass's ir.Arrays; the printer records the views it binds and, at one step, what the step
    reads from the scan's inputs (`inputs`) and carry (`carried`)."""

    def __init__(self, arrays, stacked=True):
        super().__init__(stacked=stacked, arrays=value_arrays(arrays))
        self.homes = {array.name: array for array in arrays}
        self.initial = {}  # the arrays of steps 0..T held as their steps 1..T until complete: home -> its step 0
        self.places = places(arrays)
        self.bound = set()  # the views valid now (a group's member or span, by local name)
        self.pending = []  # view bindings the statement being printed needs first
        self.written = set()  # the arrays written so far (at one step: this step's locals)
        self.before = set()  # at one step: the arrays written before the loop (their steps are scanned in)
        self.loop_writes = set()  # at one step: the arrays the loop writes
        self.inputs = {}  # at one step: local name -> stacked code scanned in
        self.carried = {}  # at one step: home -> the local read at t-1

    # reading

    def sequence(self, node):
        seq = node
        if seq.name not in self.places:
            if self.stacked:
                return RowPrinter.sequence(self, node)
            shift = self.shift(seq)
            local = f"{seq.name}_{'t' if shift == 0 else 'prev'}"
            self.inputs.setdefault(local, scanned_input(self, node, shift))
            return Code(local)
        if self.stacked:
            self.view(seq.name, self.places[seq.name].home)
            return RowPrinter.sequence(self, node)
        return Code(self.step_value(seq, self.shift(seq)))

    def shift(self, seq):
        shift = time_shift(seq.time)
        if shift not in (0, -1):
            raise PrintError(f"the forward pass reads {seq.name} at time {seq.time}; only t and t-1 can be scanned")
        return int(shift)

    def step_value(self, seq, shift):
        """The local holding seq at t (shift 0) or t-1 in a scan's step."""
        place = self.places[seq.name]
        if shift == 0:
            local = self.local(place.home)
            if local is None:
                raise PrintError(f"the forward loop reads {seq.name} at t before it assigns it")
            return self.view(f"{seq.name}_t", local, place)
        local = f"{place.home}_prev"
        if place.home in self.loop_writes:
            self.carried[place.home] = local
        elif self.homes[place.home].steps is Steps.FROM_ZERO:
            self.inputs.setdefault(local, self.steps_of(place.home, t - 1))
        else:
            raise PrintError(f"the forward loop reads {seq.name} at t-1, which holds steps 1..T only")
        return self.view(f"{seq.name}_prev", local, place)

    def local(self, home):
        """An array's value at step t: what this step wrote, else its steps scanned in (those written
        before the loop, or by no step of it); None if the step has yet to write it."""
        local = f"{home}_t"
        if home not in self.written and (home in self.before or home not in self.loop_writes):
            self.inputs.setdefault(local, self.steps_of(home, t))
        elif home not in self.written:
            return None
        return local

    def steps_of(self, home, time):
        """The code of an array's steps 1..T (time t) or 0..T-1 (time t-1), scanned into a step."""
        return str(self.at(True)(SeqAt(home, time, self.homes[home].rows, "intermediate")))

    def view(self, local, home_code, place=None):
        """The name of a member's or span's view of its group's value home_code, bound if it is not yet."""
        place = place or self.places[local]
        if place.whole:
            return home_code
        if local not in self.bound:
            self.pending.append(f"{local} = {home_code}[..., {self.rows(place)}]")
            self.bound.add(local)
        return local

    def rows(self, place):
        return self.span(place.first, place.first + place.rows, size=self.homes[place.home].rows)

    def _print_MatMul(self, expr):
        coeff, factors = expr.as_coeff_matrices()
        if len(factors) == 1 and ones(factors[0]):
            return self._print(coeff)  # c times the ones vector: the number, broadcast
        return super()._print_MatMul(expr)

    # writing

    def lines(self, statements):
        out, statements, k = [], list(statements), 0
        while k < len(statements):
            out += self.completed(statements[k]) if self.stacked else []
            run = self.parts(statements, k)
            if run:
                out += [line for statement, _ in run[1:] for line in self.completed(statement)]
                out += self.assembled(run)
                k += len(run)
                continue
            run = self.activations(statements, k)
            out += self.joined(run) if run else self._print(statements[k])
            k += len(run) or 1
        return out

    def parts(self, statements, k):
        """For all steps, the run from statements[k] assigning parts of one array of steps 1..T that nothing
        wrote yet, that together make all of it (none reading it): one concatenation, with no zeros to update."""
        run, rows = [], sp.S.Zero
        for statement in statements[k:] if self.stacked else ():
            place = self.places.get(getattr(statement.target, "name", None)) if isinstance(statement, Assign) else None
            if place is None or place.whole or (run and place.home != run[0][1].home) or sp.expand(place.first - rows):
                break
            if place.home in {self.places[s.name].home for s in atoms(statement.value, SeqAt) if s.name in self.places}:
                break
            run.append((statement, place))
            rows = place.first + place.rows
        array = self.homes[run[0][1].home] if run else None
        whole = array and sp.expand(rows - array.rows) == 0 and array.name not in self.written
        return run if whole and array.steps is Steps.FROM_ONE else []

    def assembled(self, run):
        """`home = jnp.concatenate((value, ...), axis=-1)`: a run of parts (parts), each value for all steps."""
        self.pending = []
        array = self.homes[run[0][1].home]
        values = [
            self.value_of(statement, Array(place.home, place.rows), self.printed(statement)) for statement, place in run
        ]
        self.written.add(array.name)
        comment = "; ".join(statement.comment for statement, _ in run if statement.comment)
        code = f"jnp.concatenate(({tuple_items(values)}), axis=-1)"
        return self.pending + [f"{array.name} = {code}" + (f"  # {comment}" if comment else "")]

    def printed(self, statement):
        """The code of a statement's value; "0" for zeros (a hoisted part whose every term reads the loop)."""
        return "0" if isinstance(statement.value, sp.ZeroMatrix) else str(self(statement.value))

    def value_of(self, statement, array, value):
        """The code of a statement's value (printed: `value`) as all of array: zeros, or a bias broadcast."""
        if isinstance(statement.value, sp.ZeroMatrix):
            return self.zeros(array)
        return value if atoms(statement.value, SeqAt) else self.broadcast(value, array)

    def activations(self, statements, k):
        """At one step, the run from statements[k] of in-place activations (S = f(S)) of neighbouring parts of
        one array, none of it whole: printed as one new value of the array, not one partial update each."""
        run = []
        for statement in statements[k:] if not self.stacked else ():
            value = getattr(statement, "value", None)
            place = self.places.get(getattr(statement.target, "name", None)) if value is not None else None
            if not (isinstance(value, Apply) and value.arg == statement.target and place and not place.whole):
                break
            if run and (place.home != run[-1][1].home or sp.expand(place.first - run[-1][1].first - run[-1][1].rows)):
                break
            run.append((statement, place))
        return run

    def joined(self, run):
        """`home_t = jnp.concatenate((home_t[..., :a], f(S), g(U), home_t[..., b:]), axis=-1)`: each part's
        activation of what it held before the run, the rows around them as they are."""
        self.pending = []
        array = self.homes[run[0][1].home]
        current = self.current(array)
        parts = [str(self(statement.value)) for statement, _ in run]
        first, last = run[0][1].first, run[-1][1].first + run[-1][1].rows
        head = [f"{current}[..., :{self(first)}]"] if first != 0 else []
        tail = [f"{current}[..., {self(last)}:]"] if sp.expand(last - array.rows) else []
        self.written.add(array.name)
        self.bound -= {f"{name}_t" for name, other in self.places.items() if other.home == array.name}
        comment = "; ".join(statement.comment for statement, _ in run if statement.comment)
        code = f"jnp.concatenate(({tuple_items(head + parts + tail)}), axis=-1)"
        return self.pending + [f"{array.name}_t = {code}" + (f"  # {comment}" if comment else "")]

    def _print_Assign(self, statement):
        return self.write(statement, "set")

    def _print_Accumulate(self, statement):
        return self.write(statement, "add")

    def write(self, statement, how):
        """`home = home.at[index].set(value)` (or .add); a whole array assigned, `home = value`; at one
        step a whole local accumulated, `home_t = home_t + value`."""
        self.pending = []
        value = self.printed(statement)
        place = self.places.get(statement.target.name)
        if place is None:
            raise PrintError(f"the forward pass writes {statement.target.name}, which is not one of its arrays")
        array = self.homes[place.home]
        if place.whole and how == "set" and (not self.stacked or array.steps is Steps.FROM_ONE):
            code = self.value_of(statement, array, value)
        elif place.whole and how == "add" and not self.stacked:
            code = f"{self.current(array)} + {value}"
        else:
            steps = ("1:" if array.steps is Steps.FROM_ZERO else ":") if self.stacked else ""
            rows = "" if place.whole else f"..., {self.rows(place)}"
            index = ", ".join(part for part in (steps, rows) if part)
            code = f"{self.current(array)}.at[{index}].{how}({value})"
        self.written.add(array.name)
        suffix = "" if self.stacked else "_t"
        self.bound -= {f"{name}{suffix}" for name, other in self.places.items() if other.home == array.name}
        comment = f"  # {statement.comment}" if statement.comment else ""
        return self.pending + [f"{array.name}{suffix} = {code}{comment}"]

    def broadcast(self, value, array):
        """A value that reads no sequence (a bias), as an array of every step's rows."""
        shape = f"({'T, B' if self.stacked else 'B'}, {self(array.rows)})"
        self.used.sizes |= {"T", "B"}
        return f"jnp.broadcast_to({value}, {shape})"

    def current(self, array):
        """The value a partial write (or an Accumulate) updates: the array's, or at one step its local;
        zeros if nothing wrote it yet (as every array of steps 0..T starts)."""
        if self.stacked and (array.steps is Steps.FROM_ZERO or array.name in self.written):
            return array.name
        if not self.stacked and self.local(array.name) is not None:
            return self.local(array.name)
        return self.zeros(array)

    def zeros(self, array):
        """Zeros of an array's rows, for every step (T, B, rows), or at one step (B, rows; or Steps.ONE)."""
        steps = "T, B" if self.stacked and array.steps is not Steps.ONE else "B"
        self.used.sizes |= {"T", "B", "dtype"}
        return f"jnp.zeros(({steps}, {self(array.rows)}), dtype)"

    def _print_Loop(self, loop):
        """The loop as a step function and a jax.lax.scan; the arrays it writes take its steps 1..T."""
        step = PassPrinter(self.homes.values(), stacked=False)
        step.used = self.used
        step.before = set(self.written)
        step.loop_writes = {self.places[s.target.name].home for s in loop.body}
        body = step.lines(loop.body)
        order = list(dict.fromkeys(self.places[s.target.name].home for s in loop.body))
        carry = [Carried(step.carried[home], f"{home}_t", None) for home in order if home in step.carried]
        inputs = list(step.inputs.items())
        stepped = {home: self.homes[home].steps is Steps.FROM_ONE for home in order}  # the scan's outputs as they are
        outputs = [(home if stepped[home] else f"{home}_steps", f"{home}_t") for home in order]
        scan = Scan(body, carry, inputs, outputs)
        first = [self.first_row(home) for home in order if home in step.carried]
        doc = "One step t of the recursion: the values at t-1 in, those at t out."
        lines = scan.lines(doc, first, length=None if inputs else "T")
        lines += [f"{home} = {home}.at[1:].set({home}_steps)  # steps 1..T" for home in order if not stepped[home]]
        self.written |= set(order)
        self.bound -= {local for local, place in self.places.items() if place.home in order}
        self.used.sizes |= set() if inputs else {"T"}
        return lines
