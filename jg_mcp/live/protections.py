"""Which protections run_command's commands ran under, and which of them the operator turned off.

A server never drops a protection on its own: each is in force, or the operator waived it by name (`--sandbox none`
waives all three, `--no-seccomp` the filter), or the server refused to start. The one exception is `--sandbox auto`
on a host without bubblewrap and a server that is not root: it runs commands unsandboxed, and the transcript's
header says so without a waiver, so the audit fails the transcript (`jg_mcp.record.audit_policy`).
"""

from __future__ import annotations

import os
from typing import Literal

from pydantic import ConfigDict

from jg_mcp.models import Strict

Protection = Literal["sandbox", "seccomp", "uid_separation"]
ALL: tuple[Protection, ...] = ("sandbox", "seccomp", "uid_separation")


class Protections(Strict):
    """What protected the commands of one session (the transcript header's `protections`, format 6)."""

    model_config = ConfigDict(frozen=True)
    asked: list[str]
    """The operator's choice, as the options that made it: `--sandbox auto`, `--sandbox none`, `--no-seccomp`."""
    in_force: list[Protection]
    """`sandbox`: bubblewrap (its namespaces, read-only system, private /tmp, no network, core limit 1);
    `seccomp`: its filter (no user namespaces, no keyrings, no lowering of the core limit); `uid_separation`: as
    root, each sandbox's commands run as an unprivileged uid of their own."""
    waived: list[Protection]
    """Those the operator turned off by name: all three by `--sandbox none`, the filter by `--no-seccomp`."""
    server_root: bool
    """The server ran as root. Only then is uid separation needed: a server that is not root runs commands as its
    own unprivileged uid."""

    @property
    def needed(self) -> list[Protection]:
        return [p for p in ALL if p != "uid_separation" or self.server_root]

    @property
    def missing(self) -> list[Protection]:
        """Needed, not in force, and not waived: what the audit fails a transcript for."""
        return [p for p in self.needed if p not in self.in_force and p not in self.waived]


def unsandboxed(asked: list[str]) -> Protections:
    """The protections of commands run without a sandbox: none in force; all waived when the operator asked for
    no sandbox (`--sandbox none`), else none."""
    waived: list[Protection] = list(ALL) if "--sandbox none" in asked else []
    return Protections(asked=asked, in_force=[], waived=waived, server_root=os.geteuid() == 0)
