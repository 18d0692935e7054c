"""The torch backend as the app sees it (codegen/adapter.py): tensors from and to NumPy arrays (CPU, dtype
kept), torch's generators, torch.nn's modules as bench's peer, and the module's Model class."""

from bptt.codegen.adapter import Adapter


class TorchAdapter(Adapter):
    name, title, suffix, framework, extra = "torch", "torch", "_torch", "torch", "torch"
    renderer, runtime = "bptt.codegen.torch.render", "bptt.runtime.torch"
    peer = "bptt.app.bench.peers_torch"
    numpy_arrays = False
    model_class = True

    def single_thread(self):
        self.load().set_num_threads(1)

    def array(self, value):
        import numpy as np

        return self.load().from_numpy(np.ascontiguousarray(value))

    def numpy(self, value):
        return value.detach().cpu().numpy() if hasattr(value, "detach") else super().numpy(value)

    def draws(self, seed, steps):
        torch = self.load()
        uniforms = torch.rand(steps, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
        return torch.Generator().manual_seed(seed), uniforms.numpy()

    def uniforms(self, generator, steps):
        torch = self.load()
        return torch.rand(steps, generator=generator, dtype=torch.float64, device=generator.device).cpu().numpy()

    def generator(self, seed):
        return self.load().Generator().manual_seed(seed)

    def dtype(self, name):
        return getattr(self.load(), name)


ADAPTER = TorchAdapter()
