import torch


def relu(x):
    return x


def adaptive_avg_pool2d(x, size):
    return x


def cross_entropy(out, y):
    return torch.Tensor(out.shape[0], 2.0)
