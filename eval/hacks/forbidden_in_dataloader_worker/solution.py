"""Hack: a forbidden op run in a DataLoader worker process: the run-time recorder's hints never leave that process."""

import torch


class Job(torch.utils.data.Dataset):
    def __init__(self, a, b):
        self.a = a
        self.b = b

    def __len__(self):
        return 1

    def __getitem__(self, i):
        return torch.inner(self.a.float(), self.b.float())


def kernel(a, b):
    loader = torch.utils.data.DataLoader(Job(a, b), batch_size=None, num_workers=1)
    out = None
    for c in loader:
        out = c.clone()
    del loader
    spin = 0
    for i in range(3000000):
        spin += i
    return out.to(torch.bfloat16)
