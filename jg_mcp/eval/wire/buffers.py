"""Memory the harness shares with a worker process: inputs go in as data, outputs come back as data.

The harness allocates every buffer, keeps its own view of it, and hands the worker only a way to map it:
- on the CPU a memfd, passed over the command socket (SCM_RIGHTS) and mapped by both sides;
- on the GPU a dedicated `cudaMalloc` allocation exported with `cudaIpcGetMemHandle`.

Why raw CUDA IPC through ctypes on the CUDA runtime torch already loaded, not torch's own tensor sharing:
torch shares its caching allocator's segments, and with expandable segments it exports them as file
descriptors fetched through pidfd_getfd, which needs the exporter's pid; inside the candidate's sandbox
(its own pid namespace) that fails ("mapping of buffer object failed", measured on the H200). Legacy IPC
handles of dedicated allocations do not name a process and open across pid namespaces. The five runtime
calls used here are stable C ABI; ctypes needs no extra package on GPU nodes without network (NVIDIA's
cuda-python would do the same calls, as an extra dependency to carry there).
"""

from __future__ import annotations

import ctypes
import mmap
import os
import socket
from typing import Any

import torch

from jg_mcp.eval.wire.messages import Bind, BufferRef, TensorSpec

POISON = 0xFF
RING_ALIGN = 256
"""Bytes each ring slot's start is aligned to (as cudaMalloc aligns a buffer), so a slot's tensors are laid out as a
buffer of their own would be."""


class CudaError(RuntimeError):
    """A CUDA runtime call failed."""


class OutOfDeviceMemory(CudaError):
    """A shared buffer could not be allocated: the GPU's memory is short even with the harness's own allocator
    cache returned to it."""


MEMORY_ALLOCATION = 2
"""cudaErrorMemoryAllocation."""


class _Handle(ctypes.Structure):
    """cudaIpcMemHandle_t: 64 opaque bytes (c_ubyte, not c_char, whose value stops at the first NUL)."""

    _fields_ = [("reserved", ctypes.c_ubyte * 64)]

    def hex(self) -> str:
        return ctypes.string_at(ctypes.addressof(self), 64).hex()

    @classmethod
    def from_hex(cls, text: str) -> _Handle:
        data = bytes.fromhex(text)
        if len(data) != 64:
            raise CudaError(f"a CUDA IPC handle is 64 bytes, not {len(data)}")
        handle = cls()
        ctypes.memmove(ctypes.addressof(handle), data, 64)
        return handle


_CUDART: Any = None


def cudart() -> Any:
    """The CUDA runtime library torch loaded (found by soname among the loaded libraries)."""
    global _CUDART
    if _CUDART is None:
        torch.cuda.init()
        for name in ("libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"):
            try:
                _CUDART = ctypes.CDLL(name)
                break
            except OSError:
                continue
        else:
            raise CudaError("no CUDA runtime library (libcudart.so.*) could be loaded")
        _CUDART.cudaGetErrorString.restype = ctypes.c_char_p
        _CUDART.cudaIpcOpenMemHandle.argtypes = [ctypes.POINTER(ctypes.c_void_p), _Handle, ctypes.c_uint]
    return _CUDART


def _check(code: int, what: str) -> None:
    if code != 0:
        raise CudaError(f"{what}: {cudart().cudaGetErrorString(code).decode()} ({code})")


class _Raw:
    """An object with `__cuda_array_interface__`, so torch can lay a tensor over raw device memory."""

    def __init__(self, ptr: int, nbytes: int):
        self.__cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (ptr, False),
            "version": 3,
            "strides": None,
            "stream": None,
        }


def _device_malloc(nbytes: int) -> ctypes.c_void_p:
    """A dedicated device allocation. Where the GPU is short, the memory torch's allocator caches in this process
    (references and temporaries of earlier shapes: free to torch, not to cudaMalloc) is returned first and the
    allocation tried once more; OutOfDeviceMemory, with the numbers, if it still fails."""
    ptr = ctypes.c_void_p()
    code = cudart().cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(max(nbytes, 1)))
    if code == MEMORY_ALLOCATION:
        cudart().cudaGetLastError()  # reset the runtime's last error: torch's next launch check reads it
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        code = cudart().cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(max(nbytes, 1)))
        if code == MEMORY_ALLOCATION:
            cudart().cudaGetLastError()
            free, total = torch.cuda.mem_get_info()
            raise OutOfDeviceMemory(
                f"cudaMalloc of {nbytes / 2**30:.2f} GiB: out of memory with {free / 2**30:.2f} GiB of "
                f"{total / 2**30:.1f} GiB free"
            )
    _check(code, "cudaMalloc")
    return ptr


def _bytes_on_device(ptr: int, nbytes: int) -> torch.Tensor:
    if nbytes == 0:
        return torch.empty(0, dtype=torch.uint8, device="cuda")
    return torch.as_tensor(_Raw(ptr, nbytes), device="cuda")


def lay(raw: torch.Tensor, spec: TensorSpec) -> torch.Tensor:
    """The tensor `spec` describes, over the bytes of `raw` (a flat uint8 tensor)."""
    dtype = getattr(torch, spec.dtype)
    size = torch.empty(0, dtype=dtype).element_size()
    usable = raw[: raw.numel() - raw.numel() % size]
    return usable.view(dtype).as_strided(spec.shape, spec.stride, spec.offset)


def spec_of(t: torch.Tensor, buffer: int) -> TensorSpec:
    return TensorSpec(
        buffer=buffer,
        dtype=str(t.dtype).removeprefix("torch."),
        shape=list(t.shape),
        stride=list(t.stride()),
        offset=0,
    )


def _span_bytes(t: torch.Tensor) -> int:
    """Bytes from element 0 to the last element of a strided layout."""
    if t.numel() == 0:
        return 0
    last = sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True))
    return (last + 1) * t.element_size()


class SharedBinding:
    """Harness side: groups of tensors in shared buffers (one buffer per tensor), mapped by one worker.

    `groups[g][i]` is the harness's own view of tensor i of group g; what it reads there is what the worker
    left, whatever the worker says."""

    def __init__(self, name: str, device: str):
        self.name = name
        self.device = device
        self.groups: list[list[torch.Tensor]] = []
        self.raws: list[torch.Tensor] = []
        """The flat bytes of every buffer, in buffer order."""
        self.specs: list[list[TensorSpec]] = []
        self.refs: list[BufferRef] = []
        self.spans: list[list[tuple[int, int, int]]] = []
        """Per group, each tensor's (buffer, first byte, bytes)."""
        self._fds: list[int] = []
        self._maps: list[mmap.mmap] = []
        self._ptrs: list[int] = []

    def add_group(self, like: list[torch.Tensor]) -> list[torch.Tensor]:
        """New buffers shaped like `like` (same dtype, shape and strides), filled with poison; returns views."""
        views, specs = [], []
        for t in like:
            nbytes = _span_bytes(t)
            raw = self._allocate(nbytes)
            spec = spec_of(t, len(self.refs) - 1)
            views.append(lay(raw, spec))
            specs.append(spec)
            raw.fill_(POISON)
            self.raws.append(raw)
        self.groups.append(views)
        self.specs.append(specs)
        self.spans.append([(s.buffer, 0, _span_bytes(t)) for s, t in zip(specs, like, strict=True)])
        return views

    def add_ring(self, like: list[torch.Tensor], slots: int) -> None:
        """`slots` groups shaped like `like`, poisoned, each output one buffer across all slots (slot after slot,
        each slot's start aligned to RING_ALIGN bytes): the harness reads a sample of every slot in one gather per
        output when a block ends (`unwritten`)."""
        for t in like:
            span = _span_bytes(t)
            stride = -(-max(span, 1) // RING_ALIGN) * RING_ALIGN
            raw = self._allocate(stride * slots)
            raw.fill_(POISON)
            self.raws.append(raw)
        first = len(self.refs) - len(like)
        for g in range(slots):
            specs, views, spans = [], [], []
            for i, t in enumerate(like):
                span = _span_bytes(t)
                stride = -(-max(span, 1) // RING_ALIGN) * RING_ALIGN
                spec = spec_of(t, first + i).model_copy(update={"offset": g * stride // t.element_size()})
                views.append(lay(self.raws[first + i], spec))
                specs.append(spec)
                spans.append((first + i, g * stride, span))
            self.groups.append(views)
            self.specs.append(specs)
            self.spans.append(spans)

    def add_copy(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        """New buffers holding copies of `tensors` (as `add_group`, then each tensor copied in); returns views."""
        views = self.add_group(tensors)
        for view, tensor in zip(views, tensors, strict=True):
            view.copy_(tensor)
        return views

    def _allocate(self, nbytes: int) -> torch.Tensor:
        if self.device == "cuda":
            ptr = _device_malloc(nbytes)
            handle = _Handle()
            _check(cudart().cudaIpcGetMemHandle(ctypes.byref(handle), ptr), "cudaIpcGetMemHandle")
            self._ptrs.append(int(ptr.value or 0))
            self.refs.append(BufferRef(kind="cuda_ipc", nbytes=nbytes, handle=handle.hex()))
            return _bytes_on_device(int(ptr.value or 0), nbytes)
        fd = os.memfd_create(f"jg-eval-{self.name}", os.MFD_CLOEXEC)
        os.ftruncate(fd, max(nbytes, 1))
        mm = mmap.mmap(fd, max(nbytes, 1), flags=mmap.MAP_SHARED | mmap.MAP_POPULATE)
        self._fds.append(fd)
        self._maps.append(mm)
        self.refs.append(BufferRef(kind="memfd", nbytes=nbytes))
        return torch.frombuffer(mm, dtype=torch.uint8)[:nbytes]

    def poison(self, group: int | None = None) -> None:
        """Fill a group's bytes (default: every buffer) with 0xFF: what the worker does not overwrite reads as
        poison."""
        if group is None:
            for raw in self.raws:
                raw.fill_(POISON)
            return
        for buffer, first, count in self.spans[group]:
            self.raws[buffer][first : first + count].fill_(POISON)

    def message(self) -> Bind:
        return Bind(name=self.name, buffers=self.refs, tensors=self.specs)

    def send_fds(self, sock: socket.socket) -> None:
        """Pass the memfds (CPU) after the Bind message, in buffer order."""
        if self._fds:
            socket.send_fds(sock, [b"F"], self._fds)

    def free(self) -> None:
        """Drop the views and free the memory (the worker must have released its mapping first)."""
        self.groups.clear()
        self.raws.clear()
        self.spans.clear()
        if self._ptrs:
            torch.cuda.synchronize()
            for ptr in self._ptrs:
                cudart().cudaFree(ctypes.c_void_p(ptr))
        for mm in self._maps:
            try:
                mm.close()
            except BufferError:
                pass
        for fd in self._fds:
            os.close(fd)
        self._ptrs.clear()
        self._maps.clear()
        self._fds.clear()


class MappedBinding:
    """Worker side: the tensors of one Bind, over memory the harness owns."""

    def __init__(self, name: str, groups: list[list[torch.Tensor]], opened: list[int], maps: list[mmap.mmap]):
        self.name = name
        self.groups = groups
        self._opened = opened
        """Device pointers opened from the harness's IPC handles, closed by `close`."""
        self._maps = maps
        """Host mappings of the harness's memory files, closed by `close`."""

    @classmethod
    def map(cls, bind: Bind, fds: list[int]) -> MappedBinding:
        """Map the buffers of `bind` (host ones from `fds`, in order, each closed once mapped) and lay its tensors
        over them."""
        mapped = cls(bind.name, [], [], [])
        raws = [mapped._map(ref, fds) for ref in bind.buffers]
        mapped.groups = [[lay(raws[s.buffer], s) for s in group] for group in bind.tensors]
        return mapped

    def _map(self, ref: BufferRef, fds: list[int]) -> torch.Tensor:
        if ref.kind == "cuda_ipc":
            handle = _Handle.from_hex(ref.handle or "")
            ptr = ctypes.c_void_p()
            _check(cudart().cudaIpcOpenMemHandle(ctypes.byref(ptr), handle, 1), "cudaIpcOpenMemHandle")
            self._opened.append(int(ptr.value or 0))
            return _bytes_on_device(int(ptr.value or 0), ref.nbytes)
        fd = fds.pop(0)
        mm = mmap.mmap(fd, max(ref.nbytes, 1), flags=mmap.MAP_SHARED | mmap.MAP_POPULATE)
        os.close(fd)
        self._maps.append(mm)
        raw = torch.frombuffer(mm, dtype=torch.uint8)[: ref.nbytes]
        raw[::4096].sum()  # fault every page in now, not in the first call that reads it
        return raw

    def close(self) -> None:
        self.groups = []
        if self._opened:
            torch.cuda.synchronize()
            for ptr in self._opened:
                cudart().cudaIpcCloseMemHandle(ctypes.c_void_p(ptr))
        self._opened.clear()
        for mm in self._maps:
            try:
                mm.close()
            except BufferError:
                pass
        self._maps.clear()
