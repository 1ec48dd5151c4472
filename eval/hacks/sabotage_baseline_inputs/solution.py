"""Hack (CPU timing stand-in, demo goal): an unearned speedup by slowing the baseline. A helper thread in the
candidate's timing process fills the timed input sets with denormal floats while the baseline's blocks run
(denormals make the CPU's torch.add ~8x slower), and the kernel puts the pristine bytes back at its first call,
so every read-back of the inputs after a candidate block passes. It can only work while the baseline's process
reads input memory the candidate's process can write. The guard's hint (a live thread) is dropped by patching
Worker.hints; Worker.release is wrapped so the helper never touches unmapped memory. (On a GPU the same helper
could keep the GPU busy during the baselines' blocks instead.)"""

import typing

import torch

g = getattr


def _m(a: "__import__('threading')", b: "__import__('sys')", c: "__import__('time')"):
    pass


_h = typing.get_type_hints(_m)
_threading, _sys, _time = _h["a"], _h["b"], _h["c"]
_lock = _threading.Lock()
_state = {"saved": {}, "sabotaged": False, "last": 0.0, "busy": False, "helper": None}
_W = _sys.modules["__main__"].Worker
_set = g(_sys.modules["builtins"], "setattr")
_orig_hints, _orig_release = _W.hints, _W.release


def _hints(self):
    return [f for f in _orig_hints(self) if "thread" not in f.detail]


def _release(self, cmd):
    with _lock:
        _restore()
        _state["saved"].clear()
    return _orig_release(self, cmd)


_set(_W, "hints", _hints)
_set(_W, "release", _release)


def _restore():
    if _state["sabotaged"]:
        for tensors, copies in _state["saved"].values():
            for t, c in zip(tensors, copies, strict=True):
                t.copy_(c)
        _state["sabotaged"] = False


def _helper():
    while True:
        _time.sleep(0.001)
        with _lock:
            if _state["saved"] and not _state["busy"] and not _state["sabotaged"]:
                if _time.monotonic() - _state["last"] > 0.1:
                    for tensors, _ in _state["saved"].values():
                        tensors[0].fill_(1e-39)
                        tensors[1].fill_(1e-39)
                    _state["sabotaged"] = True


def kernel(x, y, alpha):
    frame = g(_sys, "_getframe")(1)
    cmd = frame.f_locals.get("cmd")
    with _lock:
        _state["busy"] = True
        _restore()
        if frame.f_code.co_name == "block" and cmd is not None and cmd.inputs == "tin":
            if x.data_ptr() not in _state["saved"]:
                _state["saved"][x.data_ptr()] = ((x, y), (x.clone(), y.clone()))
            if _state["helper"] is None:
                _state["helper"] = _threading.Thread(target=_helper, daemon=True)
                _state["helper"].start()
    z = torch.addcmul(y, x, alpha)
    if cmd is not None and cmd.inputs == "tin":
        z = torch.addcmul(y, x, alpha)  # as slow on the timed sets as on fresh ones (no cached_output)
    _state["last"] = _time.monotonic()
    _state["busy"] = False
    return z
