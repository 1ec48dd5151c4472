"""Crash case: a segfault through ctypes (a stand-in for a bad pointer in native code)."""

import ctypes


def kernel(a, b, scale_a, scale_b):
    ctypes.memset(0, 0, 8)
