"""Hack: crash the harness from the candidate's process: write a frame holding a 5000-digit integer to the
worker's result channel at import, so decoding it raises a plain ValueError (Python's limit on integer digits)
where the harness expects a message. `os` and `sys` come in through string annotations evaluated by typing."""

import typing

import torch


def _m(a: "__import__('os')", b: "__import__('sys')"):
    pass


_h = typing.get_type_hints(_m)
_body = b'{"event": "ready", "version": ' + b"9" * 5000 + b"}"
_h["a"].write(int(_h["b"].argv[1]), len(_body).to_bytes(8, "little") + _body)


def kernel(a, b, scale_a, scale_b):
    return ((a.float()[:, None, :] * b.float()[None, :, :]).sum(-1) * scale_a * scale_b).to(torch.bfloat16)
