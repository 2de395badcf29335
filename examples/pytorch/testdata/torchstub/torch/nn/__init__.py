import torch

from . import functional  # noqa: F401


class Module:
    def __call__(self, *args):
        return self.forward(*args)

    def forward(self, x):
        return x

    def children(self):
        for v in vars(self).values():
            if isinstance(v, Module):
                yield v
            elif isinstance(v, list):
                yield from (m for m in v if isinstance(m, Module))

    def parameters(self):
        for v in vars(self).values():
            if isinstance(v, torch.Parameter):
                yield v
        for m in self.children():
            yield from m.parameters()

    def to(self, *args):
        return self

    def train(self, mode=True):
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            p.grad = None

    def state_dict(self):
        return {"params": sum(1 for _ in self.parameters())}

    def load_state_dict(self, state):
        assert state["params"] == sum(1 for _ in self.parameters()), "checkpoint of another model"


class _Layer(Module):
    def __init__(self, *args, **kwargs):
        self.weight = torch.Parameter()


Conv2d = BatchNorm2d = Linear = _Layer


class ReLU(Module):
    pass


class Sequential(Module):
    def __init__(self, *mods):
        self.mods = list(mods)

    def forward(self, x):
        for m in self.mods:
            x = m(x)
        return x


class DataParallel(Module):
    def __init__(self, module):
        self.module = module

    def forward(self, x):
        return self.module(x)
