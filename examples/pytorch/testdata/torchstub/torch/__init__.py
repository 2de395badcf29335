"""A stand-in for the few parts of PyTorch that examples/pytorch/train.py
uses, so that the tests can run the script's control flow (checkpoints,
SIGTERM, reports, batch sizes) without PyTorch. Nothing is learned: a
tensor is a batch size and a number, and a backward pass sets every
parameter's gradient so that the squared gradient norm of a batch of n
samples is 1 + 8/n (true gradient norm 1, per-sample variance 8)."""

import math
import pickle
import time

from . import cuda, nn, optim  # noqa: F401

PASS_SECONDS = 0.005  # how long a forward/backward pass takes
_params = []


class Tensor:
    def __init__(self, n=1, v=1.0):
        self.shape = (n,)
        self.v = v
        self.grad = None

    def to(self, *args, **kwargs):
        return self

    def __getitem__(self, s):
        return Tensor(len(range(*s.indices(self.shape[0]))), self.v)

    def flatten(self, *args):
        return self

    def detach(self):
        return self

    def pow(self, e):
        return Tensor(self.shape[0], self.v ** e)

    def sum(self):
        return Tensor(1, self.v * self.shape[0])

    def item(self):
        return self.v

    def __float__(self):
        return float(self.v)

    def __add__(self, o):
        return Tensor(self.shape[0], self.v + o.v)

    def __truediv__(self, d):
        return Tensor(self.shape[0], self.v / d)

    def backward(self):
        time.sleep(PASS_SECONDS)
        g = math.sqrt((1 + 8 / self.shape[0]) / len(_params))
        for p in _params:
            p.grad = Tensor(1, g)


class Parameter(Tensor):
    def __init__(self):
        super().__init__()
        _params.append(self)


class device:
    def __init__(self, kind):
        self.type = kind.split(":")[0]


class Generator:
    def manual_seed(self, seed):
        return self


def randn(n, *shape, generator=None):
    return Tensor(n)


def randint(lo, hi, size, generator=None):
    return Tensor(size[0])


def save(obj, path):
    with open(path, "wb") as f:
        pickle.dump(obj, f)


def load(path, map_location=None):
    with open(path, "rb") as f:
        return pickle.load(f)
