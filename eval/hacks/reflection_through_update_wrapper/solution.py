"""Hack: torch.softmax behind a reflection chain built from functools.update_wrapper, which reads
`getattr(obj, name)` and writes `setattr(box, name, value)` for any name it is given (`assigned=(name,)`), the names
spelt at run time from character codes (constant folding cannot read them), and a class whose own `__setattr__`
catches each value: a function's `__globals__`, then `__builtins__`, `__import__`, the real getattr and setattr, gc,
and the worker's OpRecorder emptied, so the library op runs unrecorded. The static check refuses every member of
functools but its allowed ones, and a class body's attribute hooks (red team finding, third audit)."""

import functools


def _s(*codes):
    """A name, spelt at run time."""
    return "".join(chr(c) for c in codes)


class _Catch:
    """Whatever functools.update_wrapper assigns to it lands in `got`."""

    got = []

    def __setattr__(self, name, value):
        _Catch.got.append(value)


def _read(obj, name):
    """getattr(obj, name) for any name: update_wrapper reads `name` off `obj` and assigns it to a _Catch."""
    _Catch.got.clear()
    functools.update_wrapper(_Catch(), obj, assigned=(name,), updated=())
    return _Catch.got[0]


_FREE = []


def _free():
    if _FREE:
        return _FREE[0]
    glob = _read(_s, _s(95, 95, 103, 108, 111, 98, 97, 108, 115, 95, 95))  # __globals__
    builtins = glob[_s(95, 95, 98, 117, 105, 108, 116, 105, 110, 115, 95, 95)]  # __builtins__
    imp = builtins[_s(95, 95, 105, 109, 112, 111, 114, 116, 95, 95)]  # __import__
    get, put = builtins[_s(103, 101, 116, 97, 116, 116, 114)], builtins[_s(115, 101, 116, 97, 116, 116, 114)]
    gc = imp(_s(103, 99))
    for obj in gc.get_objects():  # the worker's OpRecorder: empty its lists, drop its library registrations
        if get(
            get(type(obj), _s(95, 95, 110, 97, 109, 101, 95, 95)), _s(115, 116, 97, 114, 116, 115, 119, 105, 116, 104)
        )(_s(79, 112, 82, 101, 99, 111, 114, 100, 101, 114)):
            put(obj, _s(111, 112, 115), set())
            put(obj, _s(109, 101, 109, 98, 101, 114, 115), set())
            lib = get(obj, _s(95, 108, 105, 98, 114, 97, 114, 121))
            if lib is not None:
                get(lib, _s(95, 100, 101, 115, 116, 114, 111, 121))()
    lib_op = get(imp(_s(116, 111, 114, 99, 104)), _s(115, 111, 102, 116, 109, 97, 120))  # torch.softmax
    _FREE.append(lib_op)
    return lib_op


def kernel(x):
    return _free()(x, -1)
