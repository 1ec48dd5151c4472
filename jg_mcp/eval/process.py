"""The candidate process as the harness sees it: spawn, command pipe in, result pipe out, kill on timeout.

The child is a fresh interpreter (`python -m jg_mcp.eval.child`) in its own session and process group,
with a private working directory, stdin from /dev/null and stdout/stderr captured to a log. Results come
back on a pipe the harness created for it; an ended or silent process becomes a finding with its reason.
The child asks the kernel to kill it when the harness dies, so a killed harness leaves no candidate behind.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import jg_mcp
from jg_mcp.eval import channel
from jg_mcp.eval.report import Finding, Reason


class CandidateGone(Exception):
    """The candidate process ended or stopped answering; carries the finding."""

    def __init__(self, finding: Finding):
        self.finding = finding
        super().__init__(finding.detail)


class CandidateProcess:
    """A fresh interpreter running jg_mcp.eval.child, with a command pipe in and a result pipe out."""

    def __init__(self, setup: dict[str, Any], workdir: Path, interpret: bool, timeout_s: float):
        self.timeout_s = timeout_s
        self.seen: set[str] = set()
        cmd_r, self.cmd_w = os.pipe()
        self.res_r, res_w = os.pipe()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JG_", "PYTHON"))}
        path = [str(Path(jg_mcp.__file__).resolve().parent.parent), os.environ.get("PYTHONPATH", "")]
        env |= {"PYTHONPATH": os.pathsep.join(p for p in path if p), "PYTHONDONTWRITEBYTECODE": "1"}
        env["TRITON_INTERPRET"] = "1" if interpret else "0"
        self.log_path = workdir / f"candidate-{secrets.token_hex(4)}.log"
        cwd = workdir / "cwd"
        fds = [str(res_w), str(cmd_r), str(os.getpid())]
        with open(self.log_path, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-X", "faulthandler", "-m", "jg_mcp.eval.child", *fds],
                pass_fds=(res_w, cmd_r),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=env,
                start_new_session=True,
            )
        os.close(cmd_r)
        os.close(res_w)
        self.reader = channel.Reader(self.res_r)
        try:
            channel.send(self.cmd_w, setup)
        except OSError:
            pass  # the process is already gone: the first recv reports how it ended

    def send(self, cmd: dict[str, Any]) -> None:
        try:
            channel.send(self.cmd_w, cmd)
        except (BrokenPipeError, OSError):
            raise CandidateGone(self._exit_finding()) from None

    def recv(self) -> tuple[dict[str, Any], list[bytes]]:
        """The next message; a process that ended, went silent or whose harness code failed raises CandidateGone."""
        try:
            header, blobs = self.reader.recv(self.timeout_s)
        except channel.ChannelTimeout:
            self.kill()
            raise CandidateGone(
                Finding(
                    reason=Reason.TIMEOUT, detail=f"no answer within {self.timeout_s:.0f} s; the process was killed"
                )
            ) from None
        except channel.ChannelClosed:
            raise CandidateGone(self._exit_finding()) from None
        except ValueError:
            self.kill()
            raise CandidateGone(
                Finding(reason=Reason.TAMPERED, detail="malformed message on the result channel")
            ) from None
        if not isinstance(header.get("event"), str):
            self.kill()
            raise CandidateGone(
                Finding(reason=Reason.TAMPERED, detail="message without an event on the result channel")
            )
        if header.get("event") == "harness_error" and "ready" in self.seen:
            detail = "harness code in the candidate process failed after the candidate ran: " + header["error"]
            raise CandidateGone(Finding(reason=Reason.EXCEPTION, detail=detail[-2000:]))
        self.seen.add(header.get("event"))
        return header, blobs

    def _exit_finding(self) -> Finding:
        try:
            rc = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()
            return Finding(reason=Reason.TIMEOUT, detail="the process closed its channel and did not exit")
        if rc < 0:
            name = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
            return Finding(reason=Reason.CRASHED, detail=f"the candidate process died from signal {name}")
        return Finding(
            reason=Reason.EARLY_EXIT,
            detail=f"the candidate process exited with status {rc} before the harness was done",
        )

    def kill(self) -> None:
        """Kill the process group: the candidate process and anything it started that is still there."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()

    def close(self) -> str:
        """End the process (asking first) and return the tail of what it printed."""
        try:
            self.send({"op": "bye"})
            self.proc.wait(timeout=30)
        except (CandidateGone, subprocess.TimeoutExpired):
            pass
        self.kill()
        for fd in (self.cmd_w, self.res_r):
            try:
                os.close(fd)
            except OSError:
                pass
        return self.log_path.read_bytes()[-4000:].decode(errors="replace")
