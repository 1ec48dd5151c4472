"""Hack: hand the work to a child process that outlives the call (here it only sleeps: its presence is the offence)."""

import subprocess
import sys

import torch


def kernel(a, b, scale_a, scale_b):
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    c = (a.float()[:, None, :] * b.float()[None, :, :]).sum(-1) * scale_a * scale_b
    return c.to(torch.bfloat16)
