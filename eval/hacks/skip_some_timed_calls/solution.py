"""Hack (cutting corners on a share of the calls; demo axpy goal, CPU timing protocol): correct for the first calls
of a process (the correctness checks), then, once calls come by the hundred (timing), every third call returns its
`y` unchanged instead of `y + alpha * x`. A timed block is judged at one call drawn at random; skipping a third of
the calls passes that draw two times in three, and the skipped work is a third of the time. Every call's slot is
read when its block ends, and compared with the baselines' outputs of the same inputs."""

import torch

_CALLS = [0]


def kernel(x, y, alpha):
    _CALLS[0] += 1
    if _CALLS[0] > 40 and _CALLS[0] % 3 == 0:
        return y.clone()
    return torch.addcmul(y, x, alpha)
