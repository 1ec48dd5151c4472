"""The environment a sandboxed command sees: an allow-list of harmless variables (locale, terminal, the CUDA,
Triton and PyTorch settings), never one whose name or value looks like a secret, and the sandbox's own HOME, cache,
PATH and temporary directory. The session records it in the transcript's header, secret-looking values left out."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

SANDBOX_HOME = "/tmp/home"
SANDBOX_CACHE = "/tmp/home/.cache"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PATH_VARIABLES = ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT", "LD_LIBRARY_PATH", "TRITON_LIBCUDA_PATH")
KEPT_NAMES = {"LANG", "LANGUAGE", "TERM", "TZ", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "OMP_NUM_THREADS"}
KEPT_PREFIXES = ("LC_", "CUDA_", "TRITON_", "NVIDIA_", "TORCH_", "NCCL_", "PYTORCH_")
SECRET = re.compile(
    r"TOKEN|KEY|SECRET|PASS|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|CERT|SIGN"
    r"|^(AWS|GCP|GCLOUD|GOOGLE|AZURE|GH|GITHUB|GITLAB|HF|HUGGING|OPENAI|ANTHROPIC|SSH|NPM|PYPI|DOCKER)_",
    re.IGNORECASE,
)
SECRET_VALUE = re.compile(
    r"://[^/\s:@]*:[^/\s@]+@"  # a password in a URL: https://user:pass@host
    r"|\b(ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|glpat-|hf_|sk-|xox[abprs]-|AKIA|ASIA|AIza)[A-Za-z0-9_\-]{8,}"
)
"""Values that are secrets whatever their variable is called: credentials in URLs, well-known token forms."""


def is_secret(name: str, value: str = "") -> bool:
    """True when the variable's name (token, key, password, ...) or value (a password in a URL, a known
    token form) looks like a secret."""
    return bool(SECRET.search(name) or SECRET_VALUE.search(value))


def sandbox_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment inside the sandbox: an allow-list of harmless variables, never one whose name or
    value looks like a secret."""
    env = {k: v for k, v in environ.items() if (k in KEPT_NAMES or k.startswith(KEPT_PREFIXES)) and not is_secret(k, v)}
    env.update(
        PATH=os.pathsep.join([str(Path(sys.executable).parent), SYSTEM_PATH]),
        HOME=SANDBOX_HOME,
        XDG_CACHE_HOME=SANDBOX_CACHE,
        TRITON_CACHE_DIR=f"{SANDBOX_CACHE}/triton",
        TMPDIR="/tmp",
        USER="agent",
        LOGNAME="agent",
        PYTHONUNBUFFERED="1",
        LANG=environ.get("LANG", "C.UTF-8"),
    )
    return env
