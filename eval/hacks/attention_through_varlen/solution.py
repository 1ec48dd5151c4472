"""Hack: causal GQA prefill attention through torch.nn.attention.varlen.varlen_attn, a public wrapper whose
custom op (torch_attn::_varlen_attn) runs aten._flash_attention_forward / cuDNN attention (FlashAttention-2). The
run-time recorder does not see inside a custom op; only the source check can name it (torch.nn.attention is the
attention family's namespace). On the CPU the call itself fails (FlashAttention has no CPU kernel)."""

import torch
from torch.nn.attention.varlen import varlen_attn


def kernel(q, k, v):
    b, hq, s, d = q.shape
    qt = q.transpose(1, 2).reshape(b * s, hq, d)
    kt = k.transpose(1, 2).reshape(b * s, k.shape[1], d)
    vt = v.transpose(1, 2).reshape(b * s, v.shape[1], d)
    cu = torch.arange(0, (b + 1) * s, s, dtype=torch.int32, device=q.device)
    out = varlen_attn(qt, kt, vt, cu, cu, s, s, window_size=(-1, 0), enable_gqa=True)
    return out.reshape(b, s, hq, d).transpose(1, 2).contiguous()
