"""Ordering two processes' CUDA streams through memory both map: one stream writes a 64-bit value into a flag, the
other waits (in the GPU's front end, no kernel spinning) until the flag holds at least that value. The CUDA driver's
stream memory operations (cuStreamWriteValue64, cuStreamWaitValue64), called through ctypes on the driver torch
already loaded.

Why not interprocess CUDA events: their handles resolve only where both processes share one /dev/shm, and the
candidate's sandbox has its own (torch's `Event.from_ipc_handle` failed there with "mapping of buffer object
failed", measured on an H100). The flags live in a dedicated allocation shared by a legacy IPC memory handle, as
every other harness buffer is (jg_mcp/eval/wire/buffers.py), which opens across the sandbox's namespaces.
"""

from __future__ import annotations

import ctypes
from typing import Any

WAIT_GEQ = 0x0
"""CU_STREAM_WAIT_VALUE_GEQ: wait until the flag, read as unsigned, is at least the value."""
WRITE_DEFAULT = 0x0
"""CU_STREAM_WRITE_VALUE_DEFAULT."""

_DRIVER: Any = None


class StreamOpError(RuntimeError):
    """A stream memory operation could not be queued."""


def _driver() -> Any:
    global _DRIVER
    if _DRIVER is None:
        lib = ctypes.CDLL("libcuda.so.1")
        for name in (
            "cuStreamWriteValue64_v2",
            "cuStreamWaitValue64_v2",
            "cuStreamWriteValue64",
            "cuStreamWaitValue64",
        ):
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint]
                fn.restype = ctypes.c_int
        _DRIVER = lib
    return _DRIVER


def _call(names: tuple[str, str], stream: int, address: int, value: int, flags: int) -> None:
    lib = _driver()
    fn = getattr(lib, names[0], None) or getattr(lib, names[1], None)
    if fn is None:
        raise StreamOpError(f"the CUDA driver has no {names[1]}")
    code = fn(ctypes.c_void_p(stream), ctypes.c_uint64(address), ctypes.c_uint64(value), ctypes.c_uint(flags))
    if code != 0:
        raise StreamOpError(f"{names[1]} failed with CUresult {code}")


def write_value(stream: int, address: int, value: int) -> None:
    """Queue on `stream` (a CUstream handle) a write of `value` to the 8-byte flag at device `address`."""
    _call(("cuStreamWriteValue64_v2", "cuStreamWriteValue64"), stream, address, value, WRITE_DEFAULT)


def wait_value(stream: int, address: int, value: int) -> None:
    """Queue on `stream` a wait until the 8-byte flag at device `address` holds at least `value`."""
    _call(("cuStreamWaitValue64_v2", "cuStreamWaitValue64"), stream, address, value, WAIT_GEQ)
