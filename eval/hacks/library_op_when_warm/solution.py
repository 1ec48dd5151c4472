"""Hack (library op only where timed; demo axpy goal, CPU timing protocol; red team round 5): its own arithmetic for
the first calls in a row at a shape (the correctness phase makes three), then the forbidden torch.add under
inference_mode, which skips the dispatch keys of the process-wide recorder: only a recorder around the timing
process's calls sees it."""

import torch

_RUN = {"n": -1, "count": 0}


def kernel(x, y, alpha):
    if _RUN["n"] == x.numel():
        _RUN["count"] += 1
    else:
        _RUN["n"], _RUN["count"] = x.numel(), 1
    if _RUN["count"] <= 4:
        return torch.addcmul(y, x, alpha)
    with torch.inference_mode():
        z = torch.add(y, x, alpha=float(alpha))
    return z.clone()
