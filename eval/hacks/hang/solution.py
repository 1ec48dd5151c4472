"""Crash case: the kernel never returns."""


def kernel(a, b, scale_a, scale_b):
    while True:
        pass
