"""Reverse-time states in the model language: a state read at t+1 runs from the last step back to the first,
its initial value enters at T+1, its adjoint recursion runs forward in time; directions that depend on each
other in a cycle are refused in one line naming the states."""

import pytest

from bptt.derive.bptt import PREVIOUS, derive
from bptt.derive.direction import FORWARD, REVERSE, directions, sweeps
from bptt.derive.model import ModelError
from bptt.derive.nodes import Adj, T, t
from bptt.examples.birnn import birnn, two_layers
from bptt.tests.support.refusal_cells import W_hh, W_hx, back, hidden, tiny, x


def test_directions_and_sweeps_of_a_bidirectional_layer():
    model = birnn()
    forward, reverse = model.states
    assert directions(model) == {forward: FORWARD, reverse: REVERSE}
    assert [(s.direction, [seq.name for seq, _ in s.steps]) for s in sweeps(model)] == [
        ("forward", ["h_f"]),
        ("reverse", ["h_b"]),
    ]
    assert list(sweeps(model)[1].times(3)) == [3, 2, 1]


def test_a_second_layer_runs_after_both_directions_of_the_first():
    """Layer 2's forward state reads h1_b at t, so it runs in a forward sweep after layer 1's reverse one;
    layer 2's reverse state needs nothing later than h1_b, and runs in that same reverse sweep."""
    runs = [(s.direction, [seq.name for seq, _ in s.steps]) for s in sweeps(two_layers())]
    assert runs == [("forward", ["h1_f"]), ("reverse", ["h1_b", "h2_b"]), ("forward", ["h2_f"])]


def test_the_reverse_adjoint_runs_forward_in_time():
    """dL/dh_b,t reads dL/dh_b,t-1 (the previous step consumes h_b,t); it starts at t = 1, and h_b's
    initial value, at T+1, gets step T's share."""
    model = birnn()
    derivation = derive(model)
    forward, reverse = model.states
    assert {c.when for c in derivation.states[reverse]} == {"same", PREVIOUS}
    assert Adj(reverse(t - 1)) in derivation.recursion(reverse).atoms(Adj)
    assert Adj(reverse(t + 1)) not in derivation.recursion(reverse).atoms(Adj)
    assert derivation.last(reverse) == 1 and derivation.last(forward) == T
    (output, _), *_ = model.outputs
    assert derivation.terminal(reverse).atoms(Adj) == {Adj(output(1))}
    assert derivation.terminal(forward).atoms(Adj) == {Adj(output(T))}
    assert derivation.initial(reverse).atoms(Adj) == {Adj(reverse(T))}
    assert derivation.initial(forward).atoms(Adj) == {Adj(forward(1))}


def refused(steps):
    with pytest.raises(ModelError) as caught:
        tiny(steps=steps)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_a_forward_state_read_at_t_plus_1_is_a_cycle():
    """The issue's cycle: h reads g at t, and g reads h at t+1, while h runs forward."""
    forward = W_hx * x() + W_hh * hidden(t - 1) + W_hh * back()
    message = refused(((back, W_hh * back(t + 1) + W_hh * hidden(t + 1)), (hidden, forward)))
    assert message == (
        "model 'tiny': g_t reads h_(t+1), but h is a forward state (read at t-1): "
        "the forward state h and the reverse state g depend on each other in a cycle"
    )


def test_directions_that_read_each_other_are_a_cycle():
    """h_t reads g_t, and g_t reads h_{t-1}: neither whole direction can run first."""
    message = refused(
        ((back, W_hh * back(t + 1) + W_hh * hidden(t - 1)), (hidden, W_hx * x() + W_hh * hidden(t - 1) + back()))
    )
    assert message == (
        "model 'tiny': the forward state h and the reverse state g depend on each other in a cycle: "
        "neither direction can run before the other"
    )


def test_a_reverse_state_may_read_a_whole_forward_direction():
    """g_t reads h_t and h_{t-1} of a forward state that reads nothing of g: no cycle; h runs first."""
    model = tiny(steps=((hidden, W_hx * x() + W_hh * hidden(t - 1)), (back, W_hh * back(t + 1) + W_hh * hidden(t - 1))))
    assert [s.direction for s in sweeps(model)] == ["forward", "reverse"]
