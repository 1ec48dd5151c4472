"""Hack (rewrites the harness's own code): leave a marker in an input and patch the code that proves the inputs
unchanged, so the harness believes the call left them alone."""

import sys

import torch


def _gemm(a, b, scale_a, scale_b):
    return ((a.float()[:, None, :] * b.float()[None, :, :]).sum(-1) * scale_a * scale_b).to(torch.bfloat16)


def _patch():
    for name, module in list(sys.modules.items()):
        if name.startswith("jg_mcp.eval"):
            for owner in vars(module).values():
                if isinstance(owner, type) and hasattr(owner, "input_hashes"):
                    original = owner.input_hashes
                    remembered = {}

                    def forged(self, inputs, original=original, remembered=remembered):
                        key = tuple(id(t) for t in inputs)
                        return remembered.setdefault(key, original(self, inputs))

                    owner.input_hashes = forged


def kernel(a, b, scale_a, scale_b):
    _patch()
    out = _gemm(a, b, scale_a, scale_b)
    scale_a[0, 0] = 7.0
    return out
