"""Under memory pressure the kernel's OOM killer ends the process with the highest score: a command or candidate
that exhausts the host's memory must be that process, never the server or the harness that started it (whose death
would take every session, or the verdict, with it).

`first(argv)` runs `argv` with the highest score adjustment (1000), written to /proc/self/oom_score_adj by a shell
before it execs `argv`, and inherited by everything `argv` starts. Written by a process holding CAP_SYS_RESOURCE
(a root server or harness, before the sandbox drops to its unprivileged uid), it is also the floor that process and
its descendants may set (the kernel's oom_score_adj_min): the sandboxed code cannot lower it again. A root without
that capability (containers often drop it) sets no floor, so a hostile command may lower its score back to the
server's; the OOM killer then still takes the process holding the most memory. A kernel that refuses the write
leaves the score as it was, and the command runs."""

from __future__ import annotations

SCORE = 1000
SHELL = f'{{ echo {SCORE} > /proc/self/oom_score_adj; }} 2>/dev/null; exec "$@"'


def first(argv: list[str]) -> list[str]:
    """`argv` made the process the OOM killer takes first, it and all it starts."""
    return ["/bin/sh", "-c", SHELL, "jg-oom-first", *argv]
