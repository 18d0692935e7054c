"""The zoo LSTM's torch module trains under DistributedDataParallel (issue 10, item 3): two processes on
CPU with the gloo backend each run half of the batch, and the gradients DDP averages equal the
one-process gradients on the whole batch (each rank's loss is its half's mean; the mean of the two
equal halves' means is the whole batch's mean)."""

import pytest

pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")

import socket
import subprocess
import sys

import torch

from bptt.generated import lstm_torch

SIZES = {"d": 3, "h": 4, "q": 2}
T, B = 6, 4
WORKER = """
import sys
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from bptt.generated import lstm_torch

rank, port, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + port, rank=rank, world_size=2)
model = lstm_torch.Model(d={d}, h={h}, q={q}, init_rng=torch.Generator().manual_seed(0))
xs, ys = lstm_torch.random_inputs(torch.Generator().manual_seed(1), {T}, {B}, d={d}, h={h}, q={q})
half = slice(rank * {B} // 2, (rank + 1) * {B} // 2)
ddp = DistributedDataParallel(model)
loss = model.loss(ddp(xs[:, half]), ys[:, half])
loss.backward()
torch.save({{name: p.grad for name, p in model.named_parameters()}}, out)
dist.destroy_process_group()
""".format(T=T, B=B, **SIZES)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_ddp_averages_to_the_whole_batch_gradient(tmp_path):
    port = str(free_port())
    outs = [tmp_path / f"rank{rank}.pt" for rank in range(2)]
    workers = [
        subprocess.Popen([sys.executable, "-c", WORKER, str(rank), port, str(out)], stderr=subprocess.PIPE, text=True)
        for rank, out in enumerate(outs)
    ]
    try:
        errors = [worker.communicate(timeout=120)[1] for worker in workers]
    finally:
        for worker in workers:
            worker.kill()
    assert [worker.returncode for worker in workers] == [0, 0], errors
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
