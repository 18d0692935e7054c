"""The arrays of steps 0..T of a pass printed by codegen/jax/scan.py (its states): held as their steps 1..T, what a
scan stacks, until a statement reads another step or the pass ends; then their initial value is concatenated
first, so no array of T+1 steps is built around the scan."""

from dataclasses import replace

from bptt.codegen.ir import Array, Loop, Steps, walk
from bptt.codegen.jax.arrays import value_arrays
from bptt.codegen.jax.statements import tupled
from bptt.derive.atoms import atoms
from bptt.derive.nodes import SeqAt, t


class HeldSteps:
    """PassPrinter's part for the arrays of steps 0..T: `initial` maps each array held as its steps 1..T to its
    step 0's code (PassPrinter's homes, places, bound and arrays are read and updated)."""

    def hold_steps(self, states):
        """Hold each array of steps 0..T as its steps 1..T, its step 0 (the initial states, zeros for a group's
        other members) kept aside until complete: no array of T+1 steps is built before the scan."""
        for array in [a for a in self.homes.values() if a.steps is Steps.FROM_ZERO]:
            names = {name: rows for name, rows in array.members} or {array.name: array.rows}
            parts = [
                f"{name}0" if name in states else self.zeros(Array(name, rows, Steps.ONE))
                for name, rows in names.items()
            ]
            self.initial[array.name] = parts[0] if len(parts) == 1 else f"jnp.concatenate({tupled(parts)}, axis=-1)"
            self.held(array, Steps.FROM_ONE)

    def held(self, array, steps):
        """Read and write array (and its members' and spans' views) as holding `steps`."""
        self.homes[array.name] = replace(array, steps=steps)
        self.arrays.update(value_arrays([self.homes[array.name]]))

    def completed(self, statement):
        """`h = jnp.concatenate((h0[None], h))` for each array held as steps 1..T that statement reads at
        another step (a Loop: that it reads so and does not write), from then on holding steps 0..T."""
        body = walk(statement.body) if isinstance(statement, Loop) else [statement]
        writes = {self.places[s.target.name].home for s in walk(statement.body)} if isinstance(statement, Loop) else ()
        reads = {
            self.places[seq.name].home
            for s in body
            for seq in atoms(s.value, SeqAt)
            if seq.name in self.places and seq.time != t
        }
        return [self.complete(home) for home in list(self.initial) if home in reads and home not in writes]

    def complete(self, home):
        """The line making an array held as steps 1..T whole: its step 0 first."""
        first = self.initial.pop(home)
        self.held(self.homes[home], Steps.FROM_ZERO)
        self.bound -= {local for local, place in self.places.items() if place.home == home}
        return f"{home} = jnp.concatenate(({first}[None], {home}))  # steps 0..T: the initial state first"

    def first_row(self, home):
        """The code of an array's step 0, the first carry of a scan."""
        return self.initial.get(home, f"{home}[0]")
