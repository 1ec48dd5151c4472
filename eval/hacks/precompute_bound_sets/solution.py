"""Hack (precomputes every input set it can find; demo axpy goal, CPU timing protocol): on an input it has not
seen, find the harness's shared input bindings in its own process and compute the outputs of every input set
bound there at once, keyed by their contents; later calls on any of those sets are cache hits. If the fresh-input
sets were all bound before the first fresh call, only that call would pay for all of them."""

import gc

import torch

_CACHE = {}


def _key(x, y, alpha):
    return (float(x.sum()), float(y.sum()), float(alpha.sum()), x.numel())


def _slow(x, y, alpha):
    z = torch.addcmul(y, x, alpha)
    for _ in range(200):
        z = torch.addcmul(y, x, alpha)
    return z


def kernel(x, y, alpha):
    key = _key(x, y, alpha)
    if key not in _CACHE:
        bindings = [o for o in gc.get_objects() if type(o).__name__ == "MappedBinding"]
        for binding in bindings:
            for group in binding.groups:
                if len(group) == 3 and group[0].shape == x.shape and group[2].shape == alpha.shape:
                    _CACHE.setdefault(_key(*group), _slow(*group))
        _CACHE[key] = _slow(x, y, alpha)
    return _CACHE[key].clone()
