"""Whether the sandbox works here and which mode a server runs in: `probe` runs a trial command in a bwrap sandbox
(turning the seccomp filter off where bwrap cannot load it), `choose` resolves `--sandbox auto|bwrap|none` from it."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from jg_mcp import log
from jg_mcp.live.sandbox import Bwrap
from jg_mcp.live.uids import SandboxError

logger = log.get("jg_mcp.live.sandbox")


def probe(sandbox: Bwrap, where: Path) -> str | None:
    """None when `sandbox` can run a command in a new directory under `where`, else why not. Where bwrap runs
    but cannot load the seccomp filter, the sandbox goes on without it (`filtered` turns False)."""
    reason = _probe(sandbox, where)
    if reason is not None and sandbox.filtered:
        sandbox.filtered = False
        if _probe(sandbox, where) is not None:
            sandbox.filtered = True
            return reason
        logger.warning("the sandbox's seccomp filter cannot be loaded here; commands run without it", reason=reason)
        return None
    return reason


def _probe(sandbox: Bwrap, where: Path) -> str | None:
    if not shutil.which(sandbox.bwrap):
        return f"bubblewrap not found ({sandbox.bwrap}); install the `bubblewrap` package"
    missing = [tool for tool in ("prlimit", "setpriv") if not shutil.which(tool)]
    if missing:
        return f"{', '.join(missing)} not found (util-linux)"
    Path(where).mkdir(parents=True, exist_ok=True)
    trial_dir = Path(tempfile.mkdtemp(prefix=".sandbox-probe-", dir=where))
    trial_dir.chmod(0o755)
    try:
        ws = trial_dir / "workspace"
        ws.mkdir()
        trial = sandbox.for_workspace(ws)
        try:
            argv = trial.wrap(["/bin/sh", "-c", "echo ok > probe && cat $PWD/probe"])
            try:
                done = subprocess.run(argv, cwd=ws, capture_output=True, text=True, timeout=30, pass_fds=argv.pass_fds)
            finally:
                argv.close()
        finally:
            trial.release()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap failed to start: {exc}"
    finally:
        shutil.rmtree(trial_dir, ignore_errors=True)
    if done.returncode != 0 or done.stdout.strip() != "ok":
        hint = " (a server that is not root needs unprivileged user namespaces)"
        if sandbox.as_root:
            first, last = sandbox.limits.first_uid, sandbox.limits.first_uid + sandbox.limits.uid_count - 1
            hint = f" (commands run as a uid in {first}..{last})"
        return f"bubblewrap cannot sandbox here (exit {done.returncode}): {done.stderr.strip()[:500]}{hint}"
    return None


def choose(mode: str, sandbox: Bwrap, where: Path) -> tuple[str, str | None]:
    """Resolve `--sandbox` by probing under `where`: returns (mode that runs, warning or None).
    Raises SandboxError when `bwrap` was demanded and cannot run."""
    if mode == "none":
        return "none", None
    reason = probe(sandbox, where)
    if reason is None:
        unfiltered = "SECCOMP OFF: bwrap cannot load the filter here; commands may make user namespaces (and mount"
        return "bwrap", None if sandbox.filtered else f"{unfiltered} memory past the tmpfs caps)"
    if mode == "bwrap":
        raise SandboxError(f"--sandbox bwrap: {reason}")
    warning = f"SANDBOX OFF: {reason}; run_command runs unsandboxed with this server's privileges"
    logger.warning(warning)
    return "none", warning
