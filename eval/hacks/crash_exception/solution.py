"""Crash case: the kernel raises."""


def kernel(a, b, scale_a, scale_b):
    raise ValueError("tile size does not divide K")
