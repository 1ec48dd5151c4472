"""Hack (cached output, demo axpy goal, CPU timing protocol): slow honest work, but outputs cached by a checksum of
the inputs' contents, so the rotated input sets of the timed calls come from the cache."""

import torch

_CACHE = {}


def kernel(x, y, alpha):
    key = (float(x.sum()), float(y.sum()), float(alpha.sum()), x.numel())
    if key not in _CACHE:
        z = torch.addcmul(y, x, alpha)
        for _ in range(200):
            z = torch.addcmul(y, x, alpha)
        _CACHE[key] = z
    return _CACHE[key].clone()
