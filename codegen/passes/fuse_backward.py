"""The adjoints' side of fused gate products (fuse.py has the forward side).

The flow into dL/dh_t from the gates, W_i^T dL/di_{t+1} + W_f^T dL/df_{t+1} + ...,
becomes one product [W_i; W_f; ...]^T [dL/di; dL/df; ...]_{t+1} with the weights
stacked as for the forward product and the gates' adjoints views of one group.
The parameter gradients sum_t dL/di_t v_t^T, sum_t dL/df_t v_t^T, ... of
neighbouring members become one product over their span, each parameter's
gradient its rows of it.
"""

from dataclasses import replace

import sympy as sp

from bptt.codegen.array_names import adjoint_array
from bptt.codegen.ir import PARAMETER, Array, Assign, Guard, Pass, Rows, Steps, groups_of, rewrite, with_groups
from bptt.codegen.passes import checkpoint
from bptt.codegen.passes.fuse import internal, total_rows
from bptt.derive.blocks import split
from bptt.derive.nodes import Adj, SeqAt, T, TimeSum, matrix_sum, t


def _transposed_product(term):
    """(P, dL/dX) if term is P^T dL/dX for a parameter P, else (None, None)."""
    if isinstance(term, sp.MatMul):
        coeff, factors = term.as_coeff_matrices()
        if coeff == 1 and len(factors) == 2 and isinstance(factors[1], Adj):
            if isinstance(factors[0], sp.Transpose) and isinstance(factors[0].arg, PARAMETER):
                return factors[0].arg, factors[1]
    return None, None


class Groups:
    """The adjoint groups found so far: one per stacked weight, its members the gates' sequence names."""

    def __init__(self, stacks):
        self.stacks = stacks
        self.members = {}  # stack name -> (sequence names, rows)

    def fuse(self, value):
        """value with the terms of every stacked weight fused."""
        terms = list(value.args) if isinstance(value, sp.MatAdd) else [value]
        for stack in self.stacks:
            found = {}
            for term in terms:
                matrix, adjoint = _transposed_product(term)
                if matrix in stack.parts:
                    found.setdefault(stack.parts.index(matrix), []).append((term, adjoint))
            if len(found) != len(stack.parts) or any(len(items) != 1 for items in found.values()):
                continue
            adjoints = [found[k][0][1] for k in range(len(stack.parts))]
            names = tuple(a.of.name for a in adjoints)
            rows = tuple(a.of.rows for a in adjoints)
            times = {a.of.time for a in adjoints}
            if len(times) != 1 or self.members.setdefault(stack.name, (names, rows)) != (names, rows):
                continue
            group = SeqAt(internal(names), times.pop(), sum(rows, sp.S.Zero), "intermediate")
            weights = sp.MatrixSymbol(stack.name, group.rows, stack.parts[0].shape[1])
            fused = {item[0][0] for item in found.values()}
            terms = [term for term in terms if term not in fused] + [weights.T * Adj(group)]
        return matrix_sum(terms)

    def arrays(self):
        """The groups of adjoint arrays: `_d_i_f_o_g` with members d_i, d_f, d_o, d_g."""
        out = {}
        for names, rows in self.members.values():
            members = tuple((adjoint_array(name), r) for name, r in zip(names, rows, strict=True))
            out[internal(names)] = Array(f"_d{internal(names)}", sum(rows, sp.S.Zero), Steps.FROM_ZERO, members)
        return out


def flows(statements, initial, stacks):
    """Fuse the stacked weights' terms in every statement and initial gradient.

    Returns (statements, initial, {group sequence name: Array}, the stacks used)."""
    groups = Groups(stacks)
    statements = list(rewrite(statements, lambda s: type(s)(s.target, groups.fuse(s.value), s.comment)))
    initial = [type(i)(i.key, groups.fuse(i.value), i.weighted, i.comment) for i in initial]
    used = [stack for stack in stacks if stack.name in groups.members]
    return statements, initial, groups.arrays(), used


def stacked_window(program):
    """The Program with the window pass's flows through the gates' weights stacked (flows): its Pass holds the
    adjoint groups and the stacks they read; its Boundaries and crossings are made anew. A pass of the
    backends that print the window pass as their backward (JAX)."""
    window = program.window
    plain = rewrite(window.statements, guard=lambda boundary: Guard(boundary.body))  # made anew below
    statements, initial, groups, used = flows(plain, program.window_initial, program.forward.stacks)
    window, crossings = checkpoint.with_boundaries(Pass(tuple(statements), tuple(groups.values()), tuple(used)))
    checkpoints = replace(program.checkpoints, window_crossings=crossings)
    return replace(program, window=window, window_initial=tuple(initial), checkpoints=checkpoints)


def gradients(returns, groups):
    """Gradients sum_t dL/dX_k v_t^T (or sum_t dL/dX_k) of neighbouring members X_k of a group: one product
    over their span. Returns (statements computing the products, returns, [group Arrays])."""
    where = {name: (key, k) for key, group in groups.items() for k, (name, _) in enumerate(group.members)}
    keyed = {}
    for index, (_, value, _) in enumerate(returns):
        for total in _time_sums(value):
            found = _member_term(total.body, where)
            if found:
                (key, k), operand = found
                keyed.setdefault((key, operand), {}).setdefault(k, []).append((index, total))
    statements, returns, groups, taken = [], list(returns), dict(groups), set()
    for (key, operand), members in keyed.items():
        for first, count in _runs(sorted(members)):
            group = groups[key]
            names = [name[2:] for name, _ in group.members[first : first + count]]  # d_x and _d_x: x and _x
            rows = total_rows(group.members[first : first + count])
            if count < len(group.members):
                span = (f"_d{internal(names)}", first, count)
                groups[key] = group = Array(
                    group.name,
                    group.rows,
                    group.steps,
                    group.members,
                    group.spans + (span,) if span not in group.spans else group.spans,
                )
            adjoint = Adj(SeqAt(internal(names), t, rows, "intermediate"))
            body = adjoint if operand is None else adjoint * operand
            keys = list(dict.fromkeys(returns[members[k][0][0]][0] for k in range(first, first + count)))
            name = _fresh(f"_d{internal(keys)}", operand, taken)
            symbol = sp.MatrixSymbol(name, rows, 1 if operand is None else operand.shape[1])
            statements.append(Assign(symbol, TimeSum(body, t, 1, T), f"the gradients of {', '.join(keys)} at once"))
            offset = sp.S.Zero
            for k in range(first, first + count):
                for index, total in members[k]:
                    key_name, value, comment = returns[index]
                    returns[index] = (
                        key_name,
                        value.xreplace({total: Rows(symbol, offset, group.members[k][1])}),
                        comment,
                    )
                offset += group.members[k][1]
    return statements, returns, list(groups.values())


def _fresh(name, operand, taken):
    """name, or for a second product of the same gradients (by another operand: blocks of columns of the same
    parameters, W[:, :h] h1_t and W[:, h:] h2_t) name_<operand>, numbered if still taken; added to taken."""
    if name in taken and operand is not None and isinstance(operand.arg, SeqAt):
        name = f"{name}_{operand.arg.name}"
    fresh, number = name, 1
    while fresh in taken:
        number += 1
        fresh = f"{name}_{number}"
    taken.add(fresh)
    return fresh


def _time_sums(value):
    """The sums over time a gradient is made of: itself, or each block's of a sliced parameter."""
    whole, placed = split(value)
    return [term for term in whole + [p.value for p in placed] if isinstance(term, TimeSum)]


def _member_term(body, where):
    """((group, member index), operand) if body is dL/dX_t (operand None) or dL/dX_t v^T for a member X."""
    if isinstance(body, Adj):
        adjoint, operand = body, None
    elif isinstance(body, sp.MatMul) and body.as_coeff_matrices()[0] == 1 and len(body.args) == 2:
        adjoint, operand = body.args
        if not isinstance(adjoint, Adj) or not isinstance(operand, sp.Transpose):
            return None
    else:
        return None
    name = adjoint_array(adjoint.of.name)
    if name in where and adjoint.of.time == t:
        return where[name], operand
    return None


def _runs(indices):
    """(first, count) of the runs of consecutive indices with two or more."""
    out, start = [], None
    for k, index in enumerate(indices):
        if start is None:
            start = index
        if k + 1 == len(indices) or indices[k + 1] != index + 1:
            if index - start + 1 >= 2:
                out.append((start, index - start + 1))
            start = None
    return out


def fused_flows(program):
    """The Program with the stacked weights' terms fused in its adjoints and dL/dS_0 (flows): its adjoints Pass
    holds the adjoint groups and the stacks they read."""
    statements, initial, groups, used = flows(program.adjoints.statements, program.initial, program.forward.stacks)
    adjoints = Pass(tuple(statements), tuple(groups.values()), tuple(used))
    return replace(program, adjoints=adjoints, initial=tuple(initial))


def fused_gradients(program):
    """The Program whose gradients of neighbouring members of a group are one product over their span
    (gradients): program.gradients computes the products, and each return reads its rows."""
    groups = {array.name: array for array in groups_of(program.adjoints)}
    statements, returns, groups = gradients(program.returns, groups)
    adjoints = with_groups(program.adjoints, groups)
    return replace(program, adjoints=adjoints, gradients=Pass(tuple(statements)), returns=tuple(returns))
