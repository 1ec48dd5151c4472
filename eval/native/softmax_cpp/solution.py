"""A known-good native solution of the softmax goal in two files: this module builds softmax.cpp beside it with
torch.utils.cpp_extension.load (the CPU twin of a CUDA kernel: one pass for the row's max and sum, one to write)."""

from pathlib import Path

from torch.utils.cpp_extension import load

_ext = load(name="softmax_rows", sources=[str(Path(__file__).with_name("softmax.cpp"))], verbose=False)


def kernel(x):
    return _ext.softmax_rows(x.contiguous())
