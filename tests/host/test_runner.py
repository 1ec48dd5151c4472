"""run_command's engine: timeouts kill the whole group, output is capped, progress is sent."""

from __future__ import annotations

import os
import threading
import time

import anyio
import pytest

from jg_mcp.live.output import CappedBuffer, progress_text
from jg_mcp.live.runner import MAX_PARALLEL_COMMANDS, Argv, Runner, RunnerClosed


def run(runner, command, timeout_s=30.0, on_progress=None):
    async def go():
        with anyio.fail_after(timeout_s + 30):
            return await runner.run(command, timeout_s, on_progress)

    return anyio.run(go)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().split()[2] != "Z"


def test_exit_code_and_streams(tmp_path):
    r = run(Runner(tmp_path), "echo out; echo err >&2; exit 7")
    assert (r.exit_code, r.stdout, r.stderr, r.timed_out) == (7, "out\n", "err\n", False)


def test_runs_in_the_workspace(tmp_path):
    assert run(Runner(tmp_path), "pwd").stdout.strip() == str(tmp_path)


def test_timeout_kills_the_process_group(tmp_path):
    r = run(Runner(tmp_path), "sleep 300 & echo $! > child.pid; sleep 300", timeout_s=1)
    assert r.timed_out and r.exit_code is None
    assert 1 <= r.duration_s < 10
    assert not alive(int((tmp_path / "child.pid").read_text()))


def test_output_is_capped_keeping_head_and_tail(tmp_path):
    r = run(Runner(tmp_path, cap=1000), "echo FIRST; head -c 100000 /dev/zero | tr '\\0' x; echo; echo LAST")
    assert r.stdout.startswith("FIRST")
    assert r.stdout.rstrip().endswith("LAST")
    assert r.stdout_elided_bytes > 98000
    assert f"[... {r.stdout_elided_bytes} bytes elided ...]" in r.stdout
    assert len(r.stdout) < 1200


def test_invalid_utf8_output_is_replaced_not_fatal(tmp_path):
    r = run(Runner(tmp_path), "printf '\\xff\\xfeok'")
    assert r.exit_code == 0 and r.stdout.endswith("ok")


def test_background_job_holding_stdout_does_not_hang_the_call(tmp_path):
    runner = Runner(tmp_path)
    r = run(runner, "sleep 60 & echo started", timeout_s=30)
    assert r.exit_code == 0 and r.duration_s < 5 and "started" in r.stdout
    runner.kill_all()


def test_kill_all_ends_background_jobs_and_forgets_groups_left_empty(tmp_path):
    """At session end only groups that still had a process when their command returned are killed: an empty
    group's number can be taken by another process group on the host, which the session must not kill."""
    runner = Runner(tmp_path)
    run(runner, "true")
    assert runner.groups == set()
    run(runner, "sleep 300 > /dev/null 2>&1 & echo $! > bg.pid")
    pid = int((tmp_path / "bg.pid").read_text())
    assert alive(pid) and runner.groups == {os.getpgid(pid)}
    runner.kill_all()
    for _ in range(100):
        if not alive(pid):
            break
        anyio.run(anyio.sleep, 0.05)
    assert not alive(pid)


def test_progress_reports_elapsed_time_and_last_line(tmp_path):
    seen = []

    async def progress(elapsed, line):
        seen.append((elapsed, line))

    r = run(
        Runner(tmp_path, progress_every_s=0.2),
        "for i in 1 2 3 4 5; do echo step$i; sleep 0.2; done",
        on_progress=progress,
    )
    assert r.exit_code == 0
    assert len(seen) >= 2
    assert seen[-1][0] > seen[0][0] > 0
    assert any(line.startswith("step") for _, line in seen)


def test_a_line_that_later_output_cuts_from_the_result_is_never_shown_in_progress(tmp_path):
    """Progress shows only what the result is certain to keep: a line past the head, shown while it was the last,
    would be seen by the agent and then cut from the recorded result by the output after it (a red-team attack)."""
    seen = []

    async def progress(elapsed, text):
        seen.append(text)

    command = (
        "head -c 2000 /dev/zero | tr '\\0' a; echo; echo HIDDEN-$((6*7)); sleep 1; head -c 2000 /dev/zero | tr '\\0' b"
    )
    r = run(Runner(tmp_path, cap=1000, progress_every_s=0.2), command, on_progress=progress)
    assert r.exit_code == 0 and r.stdout_elided_bytes > 0 and "HIDDEN-42" not in r.stdout
    assert len(seen) >= 2
    assert not [text for text in seen if "HIDDEN-42" in text]
    assert any("bytes of stdout" in text for text in seen)


def test_progress_shows_the_last_line_while_the_output_is_all_in_the_head():
    buf, err = CappedBuffer(100), CappedBuffer(100)
    buf.add(b"x" * 40 + b"\nlast\n")
    assert progress_text(buf, err) == "last"
    buf.add(b"\nmore" * 4)
    assert "bytes of stdout" in progress_text(buf, err) and "more" not in progress_text(buf, err)


@pytest.mark.parametrize("command", ["exec 1>&-; sleep 0.2; echo done >&2", "kill -9 $$"])
def test_odd_commands_finish(tmp_path, command):
    r = run(Runner(tmp_path), command, timeout_s=20)
    assert not r.timed_out


def test_a_call_cancelled_while_its_command_starts_still_kills_the_command(tmp_path, monkeypatch):
    """A client that disconnects (or cancels) in the moment between the command's spawn and the runner holding
    its process must not leave the command running: on the H200 host's CI a stdio client closed its end 10 ms
    after the call, bwrap had been spawned, and `sleep 600` outlived the server. The spawn is stretched here by
    a pause after it, in which the call is cancelled."""
    from jg_mcp.live import runner as runner_module

    spawned: list[int] = []
    real_open = anyio.open_process

    async def slow_open(*args, **kwargs):
        proc = await real_open(*args, **kwargs)
        spawned.append(proc.pid)
        await anyio.sleep(0.5)
        return proc

    monkeypatch.setattr(runner_module.anyio, "open_process", slow_open)

    async def go():
        async with anyio.create_task_group() as tg:
            tg.start_soon(Runner(tmp_path).run, "sleep 300", 60.0)
            await anyio.sleep(0.2)
            tg.cancel_scope.cancel()

    anyio.run(go)
    [pid] = spawned
    deadline = time.monotonic() + 10
    while alive(pid):
        assert time.monotonic() < deadline, "the command outlived its cancelled call"
        time.sleep(0.05)


def test_preparing_the_sandbox_does_not_hold_up_the_event_loop(tmp_path):
    """A sandbox's wrap walks the workspace (handing it to the sandbox uid): with a million files that takes
    seconds, which on the event loop would stall every other request of the server meanwhile."""

    def slow_wrap(argv):
        time.sleep(1.5)
        return argv

    gaps: list[float] = []

    async def go():
        async def tick():
            last = time.monotonic()
            while True:
                await anyio.sleep(0.05)
                gaps.append(time.monotonic() - last)
                last = time.monotonic()

        async with anyio.create_task_group() as tg:
            tg.start_soon(tick)
            result = await Runner(tmp_path, wrap=slow_wrap).run("echo ran", 30.0)
            tg.cancel_scope.cancel()
        return result

    assert anyio.run(go).stdout == "ran\n"
    assert max(gaps) < 1.0, f"the event loop stalled for {max(gaps):.2f} s (the wrap takes 1.5 s)"


def test_a_sessions_commands_run_at_most_a_few_at_once(tmp_path):
    """Each sandboxed command gets its own bounded /tmp and /dev/shm in memory: parallel calls would multiply
    that bound. A session runs at most MAX_PARALLEL_COMMANDS at once; the others wait their turn."""
    runner = Runner(tmp_path)
    command = "echo start $(date +%s.%N) >> log; sleep 0.4; echo end $(date +%s.%N) >> log"

    async def go():
        async with anyio.create_task_group() as tg:
            for _ in range(MAX_PARALLEL_COMMANDS + 3):
                tg.start_soon(runner.run, command, 30.0)

    anyio.run(go)
    events = sorted(
        (float(t), +1 if kind == "start" else -1)
        for kind, t in (line.split() for line in (tmp_path / "log").read_text().splitlines())
    )
    running, most = 0, 0
    for _, step in events:
        running += step
        most = max(most, running)
    assert len(events) == 2 * (MAX_PARALLEL_COMMANDS + 3) and most == MAX_PARALLEL_COMMANDS, events


def _late_touch(runner: Runner, outcomes: list[object]):
    """A call of `touch late` that records its result, or the RunnerClosed it was refused with."""

    async def call():
        try:
            outcomes.append(await runner.run("touch late", 30.0))
        except RunnerClosed as exc:
            outcomes.append(exc)

    return call


def test_a_command_waiting_for_a_slot_never_starts_once_the_session_closes(tmp_path):
    """A close kills the running commands, which frees their slots: a command queued behind them must not start
    then, after the transcript's last scan (its changes would be recorded nowhere)."""
    runner = Runner(tmp_path)
    outcomes: list[object] = []

    queued = _late_touch(runner, outcomes)

    async def go():
        async with anyio.create_task_group() as tg:
            for _ in range(MAX_PARALLEL_COMMANDS):
                tg.start_soon(runner.run, "sleep 20", 30.0)
            await anyio.sleep(0.5)
            tg.start_soon(queued)
            await anyio.sleep(0.5)
            runner.kill_all()

    anyio.run(go)
    time.sleep(0.3)
    assert len(outcomes) == 1 and isinstance(outcomes[0], RunnerClosed), outcomes
    assert not (tmp_path / "late").exists()


@pytest.mark.slow
def test_the_wait_for_a_slot_counts_against_the_commands_timeout(tmp_path):
    """A budget grants a command seconds from its call: a command that queued for a slot gets only what is left
    of its timeout, and none at all when the wait took it all."""
    runner = Runner(tmp_path)
    results: list = []

    async def go():
        async with anyio.create_task_group() as tg:
            for _ in range(MAX_PARALLEL_COMMANDS):
                tg.start_soon(runner.run, "sleep 2", 30.0)
            await anyio.sleep(0.3)
            started = time.monotonic()
            results.append(await runner.run("touch late; sleep 5", 1.0))
            results.append(time.monotonic() - started)

    anyio.run(go)
    result, took = results
    assert result.timed_out and result.exit_code is None and took < 1.8, (result, took)
    assert not (tmp_path / "late").exists() and "slot" in (result.notice or ""), result


def test_a_command_still_being_set_up_when_the_session_closes_never_runs(tmp_path):
    """The sandbox's setup (handing the workspace to the sandbox uid) can take seconds on a workspace of many
    files. A close landing then (a budget spent by a parallel call) must stop the command: once set up, it would
    otherwise run after the transcript's last scan and close event, changing files recorded nowhere."""
    set_up, ended = threading.Event(), []

    def slow_wrap(argv):
        set_up.set()
        time.sleep(1.0)
        return Argv(argv, ended=lambda: ended.append(True))

    runner = Runner(tmp_path, wrap=slow_wrap)
    outcomes: list[object] = []

    call = _late_touch(runner, outcomes)

    async def go():
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await anyio.to_thread.run_sync(set_up.wait)
            runner.kill_all()

    anyio.run(go)
    time.sleep(0.3)
    assert len(outcomes) == 1 and isinstance(outcomes[0], RunnerClosed), outcomes
    assert not (tmp_path / "late").exists()
    assert ended == [True], "what the setup prepared (a sandbox's seal) is undone though nothing ran"
    assert runner.wait_quiet(0)


def test_a_close_landing_while_the_process_is_spawned_kills_it_and_the_close_waits_for_that(tmp_path, monkeypatch):
    """kill_all kills the process groups it knows; a process whose spawn is under way is not one yet. The runner
    kills such a process itself as soon as it holds it, and the close (`wait_quiet`, before its last scan) waits
    until it is gone, so nothing of the session runs or writes after the close event."""
    from jg_mcp.live import runner as runner_module

    runner = Runner(tmp_path)
    real_open = anyio.open_process
    spawned: list[int] = []
    quiet_at_spawn: list[bool] = []

    async def close_during_spawn(*args, **kwargs):
        runner.kill_all()  # the close lands while the process is being started
        quiet_at_spawn.append(runner.wait_quiet(0))
        proc = await real_open(*args, **kwargs)
        spawned.append(proc.pid)
        return proc

    monkeypatch.setattr(runner_module.anyio, "open_process", close_during_spawn)
    with pytest.raises(RunnerClosed, match="killed as it started"):
        run(runner, "sleep 0.5; touch late", 30.0)
    assert quiet_at_spawn == [False], "a close must wait for a command whose process is being started"
    assert runner.wait_quiet(0)
    [pid] = spawned
    assert not alive(pid)
    time.sleep(1.0)
    assert not (tmp_path / "late").exists()


def test_a_flood_of_short_lines_is_kept_without_splitting_it_per_chunk(monkeypatch):
    """Output is added on the event loop chunk by chunk: its last line is found only when a progress report asks,
    never per chunk (a red-team `yes` split 16,000 lines a chunk there and slowed every session's calls)."""
    from jg_mcp.live import output

    splits: list[int] = []
    real = output._last_line
    monkeypatch.setattr(output, "_last_line", lambda data: splits.append(len(data)) or real(data))
    buf = CappedBuffer(64 * 1024)
    for _ in range(200):
        buf.add(b"y\n" * 32768)
    assert not splits
    assert buf.last_line == "y" and buf.total == 200 * 65536 and len(buf.head) + len(buf.tail) == 64 * 1024
    buf.add(b"done\n\n  \n")
    assert buf.last_line == "done"
