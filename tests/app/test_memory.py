"""Absurd sizes are refused before anything is allocated: an integer option of more digits than it takes, and a
T, B or size whose arrays need more memory than the machine has (app/memory.py), are one line and exit 2; the
estimate is a lower bound of what loss_and_grads allocates, and not a vacuous one."""

import argparse
import tracemalloc

import numpy as np
import pytest

from bptt.app import memory
from bptt.app.arguments import positive, seed
from bptt.derive.models import names
from bptt.tests.support.cli import assert_user_error, bptt
from bptt.tests.support.modules import module_of


@pytest.mark.parametrize("name", names())
@pytest.mark.parametrize(("steps", "batch", "size"), [(40, 8, 16), (5, 3, 64)])
def test_needed_is_a_lower_bound_of_what_loss_and_grads_holds(name, steps, batch, size):
    module = module_of(name)
    sizes = {size_name: size for size_name in module.SIZES}
    rng = np.random.default_rng(0)
    params = module.init_params(rng, **sizes)
    xs, ys = module.random_inputs(rng, steps, batch, **sizes)
    given = sum(value.nbytes for value in params.values()) + xs.nbytes
    tracemalloc.start()
    try:
        module.loss_and_grads(params, xs, ys)
        held = given + tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    need = memory.needed(module, steps, batch, sizes, 8)
    assert held / 8 <= need <= held, (need, held)


def test_in_units():
    assert [memory.in_units(count) for count in (0, 1023, 1024, 3 * 2**30 + 2**29, 10**30)] == [
        "0 bytes",
        "1023 bytes",
        "1 KiB",
        "3.5 GiB",
        f"{10**30 / 2**60:.3g} EiB",
    ]


def a_batch_beyond_this_machine(module, sizes, steps):
    """A B whose arrays need at least twice the memory available now."""
    per_sample = memory.needed(module, steps, 2, sizes, 8) - memory.needed(module, steps, 1, sizes, 8)
    return 2 * memory.available() // per_sample + 1


@pytest.mark.parametrize("command", ["check", "bench"])
def test_a_batch_beyond_the_memory_is_refused_in_one_line(command):
    module = module_of("elman")
    sizes = {"d": 3, "h": 4, "q": 5} if command == "check" else {name: 32 for name in module.SIZES}
    steps = 5 if command == "check" else 35
    batch = a_batch_beyond_this_machine(module, sizes, steps)
    result = bptt(command, "elman", "--batch", batch)
    assert_user_error(result, f"T={steps}, B={batch}, d=", "needs at least", "available; give a smaller --steps")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--sizes", "d=3,h=999999999,q=5"), "T=5, B=3, d=3, h=999999999, q=5: the check needs at least"),
        (("--steps", "999999999"), "T=999999999, B=3, d=3, h=4, q=5: the check needs at least"),
        (
            ("--sizes", "d=3,h=" + "9" * 5000 + ",q=5"),
            "--sizes: expected NAME=N for d, h, q with N from 1 to 999999999",
        ),
        (("--steps", "9" * 4000), "--steps: expected a positive integer of at most 999999999, got '999"),
        (("--seed", "9" * 5000), "--seed: expected a non-negative integer of at most 18446744073709551615"),
        (("--sizes", "d=3,h=-4,q=5"), "with N from 1 to 999999999, got 'h=-4'"),
    ],
)
def test_absurd_numbers_are_refused_before_any_work(args, fragment):
    result = bptt("check", "elman", *args)
    assert_user_error(result, fragment)
    assert len(result.stderr) < 400, result.stderr  # the number typed is shown by its length, not whole


def test_integer_options_read_their_digits_not_their_length():
    """Leading zeros say nothing of a number's size (0000000005 is 5, a run of 5000 zeros and a 7 is 7, read without
    int() of 5001 digits); a sign is read; more digits than the bound has are refused unread."""
    assert [positive(text) for text in ("0000000005", "0" * 5000 + "7", "+3", " 12 ")] == [5, 7, 3, 12]
    assert seed("0") == 0 and seed("000") == 0
    for text, says in [("-3", "got '-3'"), ("0", "got '0'"), ("1" + "0" * 9, "of at most 999999999"), ("1e3", "got")]:
        with pytest.raises(argparse.ArgumentTypeError, match=says):
            positive(text)
