"""The zoo LSTM's torch module trains under DistributedDataParallel (issue 10, item 3): two processes on
CPU with the gloo backend (forked from the test's, which has imported torch already) each run half of the
batch, and the gradients DDP averages equal the one-process gradients on the whole batch (each rank's loss is
its half's mean; the mean of the two equal halves' means is the whole batch's mean)."""

import pytest

pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")

import socket

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from bptt.generated import lstm_torch
from bptt.tests.support.forked import side_by_side

SIZES = {"d": 3, "h": 4, "q": 2}
T, B = 6, 4


def rank_gradients(rank, port, out):
    """One rank of two: its half of the batch through DDP, its parameters' gradients saved to out."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    model = lstm_torch.Model(**SIZES, init_rng=torch.Generator().manual_seed(0))
    xs, ys = lstm_torch.random_inputs(torch.Generator().manual_seed(1), T, B, **SIZES)
    half = slice(rank * B // 2, (rank + 1) * B // 2)
    ddp = DistributedDataParallel(model)
    loss = model.loss(ddp(xs[:, half]), ys[:, half])
    loss.backward()
    torch.save({name: p.grad for name, p in model.named_parameters()}, out)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_ddp_averages_to_the_whole_batch_gradient(tmp_path):
    # DistributedDataParallel's constructor imports torch._dynamo (0.8 s): once here before the ranks fork, not in each
    # rank, nor while every worker collects the tests
    import torch._dynamo  # noqa: F401

    port = free_port()
    outs = [tmp_path / f"rank{rank}.pt" for rank in range(2)]
    calls = [lambda rank=rank, out=out: rank_gradients(rank, port, out) for rank, out in enumerate(outs)]
    ranks = side_by_side(calls, timeout=120)
    assert [status for status, _ in ranks] == [0, 0], [stderr for _, stderr in ranks]
    model = lstm_torch.Model(**SIZES, init_rng=torch.Generator().manual_seed(0))
    xs, ys = lstm_torch.random_inputs(torch.Generator().manual_seed(1), T, B, **SIZES)
    _, expected = lstm_torch.loss_and_grads(model.params(), xs, ys)
    for out in outs:
        got = torch.load(out)
        assert list(got) == list(lstm_torch.PARAMS)
        for name in lstm_torch.PARAMS:
            scale = expected[name].abs().max()
            assert (got[name] - expected[name]).abs().max() <= 1e-12 * scale, name
    half = lstm_torch.loss_and_grads(model.params(), xs[:, : B // 2], ys[:, : B // 2])[1]["V"]
    assert (half - expected["V"]).abs().max() > 1e-6  # one half alone is not the whole batch's gradient
