"""Replay: the demo's workspace rebuilt byte for byte, steps, blob caps, re-runs, format versions."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest
from mcp.client.stdio import get_default_environment

from jg_mcp.commands import replay as replay_cli
from jg_mcp.errors import TranscriptError, UsageError
from jg_mcp.live.sandbox import SandboxLimits
from jg_mcp.live.workspace import Workspace
from jg_mcp.record import replay, steps
from jg_mcp.record.events import FORMAT_VERSION
from jg_mcp.record.integrity import diagnose
from jg_mcp.record.reading import read_transcript
from jg_mcp.scripted import call
from tests.support import (
    REPO,
    SECRET_VAR,
    bwrap_missing,
    copy_transcript,
    demo_dir,
    demo_run,
    jg,
    rechain,
    scripted_session,
)

BWRAP_MISSING = bwrap_missing()
EXAMPLE = REPO / "transcripts" / "examples" / "demo-axpy.jsonl"


def replay_command(transcript: Path, to: Path, step: int | None = None, rerun: bool = False) -> int:
    """`jg-mcp replay` in this process (its parsing is covered by the subprocess tests)."""
    return replay_cli.run(argparse.Namespace(transcript=transcript, to=to, step=step, rerun=rerun, sandbox="bwrap"))


def files(root: Path) -> dict[str, bytes]:
    return {rel: (root / rel).read_bytes() for rel in Workspace.open(root).scan().states}


@pytest.mark.slow
def test_replay_to_the_end_reproduces_the_demo_workspace_byte_for_byte(tmp_path):
    done = jg("replay", demo_run(), "--to", tmp_path / "r")
    assert done.returncode == 0, done.stdout + done.stderr
    rebuilt, original = files(tmp_path / "r"), files(demo_dir() / "workspace")
    assert "listing.txt" in rebuilt, "a file written by a command is rebuilt too"
    assert rebuilt == original
    assert (tmp_path / "r" / "reference.py").stat().st_mode & 0o222 == 0, "the reference copy is read-only again"
    assert "4 files" in done.stdout


@pytest.mark.slow
def test_rerun_reports_every_demo_command_as_matching(tmp_path):
    # The demo's server got the MCP stdio client's small default environment; the re-run gets the one it
    # recorded, whatever the reviewer's is.
    assert set(os.environ) != set(get_default_environment())
    done = jg("replay", demo_run(), "--to", tmp_path / "r", "--rerun")
    assert done.returncode == 0, done.stdout + done.stderr
    verdicts = [line.split()[2] for line in done.stdout.splitlines() if line.strip().startswith("step ")]
    assert verdicts == ["match", "match"], done.stdout
    assert "environment: the recorded one" in done.stdout
    assert files(tmp_path / "r") == files(demo_dir() / "workspace")


@pytest.mark.slow
def test_a_step_is_the_nth_tool_call_and_step_zero_is_the_session_start(tmp_path):
    record = steps.load_record(demo_run())
    assert [c.tool for c in record.calls] == [
        "query_gpu",
        "read_file",
        "write_file",
        "write_file",
        "run_command",
        "run_command",
        "read_file",
    ]
    for step, expected in [
        (0, {"reference.py"}),
        (3, {"reference.py", "solution.py"}),
        (5, {"reference.py", "solution.py", "check.py"}),
        (6, {"reference.py", "solution.py", "check.py", "listing.txt"}),
    ]:
        report = replay.rebuild(record, tmp_path / str(step), step)
        assert set(files(tmp_path / str(step))) == expected, step
        assert not report.problems
    with pytest.raises(ValueError, match="steps 0..7"):
        replay.rebuild(record, tmp_path / "x", 8)
    with pytest.raises(UsageError, match="--step 8 is out of range"):  # exit 2 through the CLI
        replay_command(demo_run(), tmp_path / "y", step=8)


@pytest.mark.slow
def test_replay_refuses_a_directory_that_is_not_empty(tmp_path):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError):
        replay.rebuild(steps.load_record(demo_run()), tmp_path / "r")
    with pytest.raises(UsageError, match="not an empty directory"):
        replay_command(demo_run(), tmp_path / "r")
    assert (tmp_path / "r" / "keep.txt").read_text() == "mine"


def test_commands_that_delete_and_overwrite_files_are_replayed_at_each_step(tmp_path):
    transcript, ws = scripted_session(
        tmp_path,
        [
            call("write_file", path="a.txt", content="one\n"),
            call("run_command", command="echo two > a.txt && mkdir -p d && echo three > d/b.txt"),
            call("run_command", command="rm a.txt"),
        ],
    )
    record = steps.load_record(transcript)
    replay.rebuild(record, tmp_path / "s2", 2)
    assert (tmp_path / "s2" / "a.txt").read_text() == "two\n"
    assert (tmp_path / "s2" / "d" / "b.txt").read_text() == "three\n"
    replay.rebuild(record, tmp_path / "end")
    assert files(tmp_path / "end") == files(ws)
    assert not (tmp_path / "end" / "a.txt").exists()


def test_a_file_over_the_blob_cap_is_reported_as_not_reconstructible(tmp_path, capsys):
    transcript, _ = scripted_session(tmp_path, [call("run_command", command="head -c 9000000 /dev/zero > big.bin")])
    assert replay_command(transcript, tmp_path / "r") == 1
    out = capsys.readouterr().out
    assert "not reconstructible" in out and "big.bin" in out and "9000000 bytes" in out
    assert not (tmp_path / "r" / "big.bin").exists()


def test_rerun_tells_output_that_changes_from_an_exit_code_that_changes(tmp_path, capsys):
    flag = tmp_path / "flag"
    flag.write_text("present while recording")
    transcript, _ = scripted_session(
        tmp_path,
        [
            call("run_command", command="date +%s%N"),
            call("run_command", command=f"test -e {flag}"),
        ],
    )
    flag.unlink()
    results = replay.rerun_commands(steps.load_record(transcript), _rebuilt(transcript, tmp_path / "r")).results
    assert [r.verdict for r in results] == ["output differs", "exit code differs"]
    assert "--- recorded stdout" in results[0].diff and results[0].exit_matches
    assert results[1].recorded_exit == 0 and results[1].rerun_exit == 1
    assert replay_command(transcript, tmp_path / "cli", rerun=True) == 1
    out = capsys.readouterr().out
    assert "Timings" in out and "exit code differs" in out and "output differs" in out


@pytest.mark.slow
def test_rerun_where_bubblewrap_cannot_run_fails_unless_sandbox_none_is_passed(tmp_path):
    """A reviewer re-running an agent's commands on a machine without bubblewrap had them run unsandboxed, with
    the reviewer's privileges, after a warning only. Now the re-run fails (exit 1) saying how to opt in."""
    marker = tmp_path / "ran-outside"
    transcript, _ = scripted_session(tmp_path / "s", [call("run_command", command=f"echo ran >> {marker}")])
    assert marker.read_text() == "ran\n"
    (tmp_path / "no-bwrap").mkdir()
    env = {**os.environ, "PATH": str(tmp_path / "no-bwrap")}  # no bwrap (nor prlimit, setpriv) to be found
    refused = jg("replay", transcript, "--to", tmp_path / "r", "--rerun", env=env)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "bubblewrap" in refused.stderr and "--sandbox none" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr and marker.read_text() == "ran\n"
    opted = jg("replay", transcript, "--to", tmp_path / "r2", "--rerun", "--sandbox", "none", env=env)
    assert opted.returncode == 0, opted.stdout + opted.stderr
    assert "sandbox none" in opted.stdout and marker.read_text() == "ran\nran\n"


def _rebuilt(transcript: Path, dest: Path) -> Path:
    replay.rebuild(steps.load_record(transcript), dest)
    return dest


@pytest.mark.slow
def test_replay_refuses_a_tampered_transcript_naming_the_line(tmp_path):
    t = copy_transcript(demo_run(), tmp_path / "t")
    lines = t.read_bytes().split(b"\n")
    del lines[5]
    t.write_bytes(b"\n".join(lines))
    with pytest.raises(TranscriptError, match=":6: sequence number 6, expected 5"):
        steps.load_record(t)


@pytest.mark.slow
def test_a_transcript_declaring_an_older_format_version_reads(tmp_path):
    t = copy_transcript(demo_run(), tmp_path / "t")
    lines = t.read_bytes().split(b"\n")[:-1]
    header = json.loads(lines[0])
    header["format_version"] = 0
    t.write_bytes(rechain([json.dumps(header).encode(), *lines[1:]]))
    assert read_transcript(t).events[0].format_version == 0
    replay.rebuild(steps.load_record(t), tmp_path / "r")
    assert files(tmp_path / "r") == files(demo_dir() / "workspace")


@pytest.mark.slow
def test_a_transcript_of_a_newer_format_is_refused_as_newer_even_with_fields_this_reader_lacks(tmp_path):
    t = copy_transcript(demo_run(), tmp_path / "t")
    lines = t.read_bytes().split(b"\n")[:-1]
    header = json.loads(lines[0]) | {"format_version": FORMAT_VERSION + 1, "a_later_field": 1}
    t.write_bytes(rechain([json.dumps(header).encode(), *lines[1:]]))
    with pytest.raises(TranscriptError, match=f"format version {FORMAT_VERSION + 1} is newer"):
        read_transcript(t)
    assert [p.kind for p in diagnose(t).problems] == ["header"]


def test_the_committed_example_transcript_stays_readable_and_rebuilds(tmp_path):
    read = read_transcript(EXAMPLE)
    assert read.closed and not read.truncated
    record = steps.load_record(EXAMPLE)
    report = replay.rebuild(record, tmp_path / "r")
    assert not report.problems and not report.not_reconstructible
    assert set(files(tmp_path / "r")) == {"reference.py", "solution.py", "check.py", "listing.txt"}
    # Format 1 did not record the commands' environment: a re-run says it uses this machine's.
    assert record.header.format_version == 1 and record.header.env is None
    env, notes = replay.rerun_env(record)
    assert env is None and "did not record the commands' environment" in notes[0]


@pytest.mark.slow
@pytest.mark.parametrize("sandbox", ["none", "bwrap"])
def test_rerun_uses_the_recorded_environment_not_the_reviewers(tmp_path, monkeypatch, sandbox):
    if sandbox == "bwrap" and BWRAP_MISSING:
        pytest.skip(BWRAP_MISSING)
    var = "TRITON_JG_TEST_GREETING"  # on bwrap's allow-list
    monkeypatch.setenv(var, "recorded")
    transcript, _ = scripted_session(tmp_path, [call("run_command", command=f"echo ${var}")], sandbox=sandbox)
    assert steps.load_record(transcript).calls[0].structured["stdout"] == "recorded\n"
    monkeypatch.setenv(var, "the reviewer's")
    rerun = replay.rerun_commands(steps.load_record(transcript), _rebuilt(transcript, tmp_path / "r"))
    assert rerun.env_recorded and [r.verdict for r in rerun.results] == ["match"], rerun.results[0].diff

    # Without the recorded environment (as in format 1) the same re-run sees the reviewer's.
    old = copy_transcript(transcript, tmp_path / "old")
    lines = old.read_bytes().split(b"\n")[:-1]
    header = json.loads(lines[0]) | {"format_version": 1}
    for key in ("env", "env_redacted", "sandbox_limits"):
        del header[key]
    old.write_bytes(rechain([json.dumps(header).encode(), *lines[1:]]))
    rerun = replay.rerun_commands(steps.load_record(old), _rebuilt(old, tmp_path / "r-old"))
    assert not rerun.env_recorded and [r.verdict for r in rerun.results] == ["output differs"]


def test_rerun_applies_the_recorded_sandbox_limits_and_names_those_it_does_not_know(tmp_path):
    transcript, _ = scripted_session(tmp_path, [call("run_command", command="true")])
    lines = transcript.read_bytes().split(b"\n")[:-1]
    header = json.loads(lines[0]) | {"sandbox_limits": {"max_file_bytes": 4096, "a_retired_limit": 7}}
    transcript.write_bytes(rechain([json.dumps(header).encode(), *lines[1:]]))
    limits, notes = replay.rerun_limits(steps.load_record(transcript))
    assert limits.max_file_bytes == 4096 and limits.max_processes == SandboxLimits().max_processes
    assert notes == ["recorded sandbox limits this version cannot apply: a_retired_limit=7"]

    # The header is the transcript writer's: no more room than this host's defaults, and never its uids.
    crafted = {
        "max_tmp_bytes": 1 << 50,
        "max_processes": -1,
        "first_uid": 100000,
        "uid_count": 1,
        "max_file_bytes": 0,
    }
    header = json.loads(lines[0]) | {"sandbox_limits": crafted}
    transcript.write_bytes(rechain([json.dumps(header).encode(), *lines[1:]]))
    limits, notes = replay.rerun_limits(steps.load_record(transcript))
    assert limits == SandboxLimits()
    assert notes == [
        "recorded sandbox limits past this host's defaults, re-run at the defaults: "
        f"max_tmp_bytes={1 << 50}, max_processes=-1, max_file_bytes=0"
    ]


@pytest.mark.slow
def test_a_rerun_binds_no_host_directory_that_the_recorded_environment_names(tmp_path):
    """The recorded environment reaches the re-run's commands as values only: the toolchain directories bound into
    its sandbox are this host's, never those a transcript's header names (its writer chose them)."""
    if BWRAP_MISSING:
        pytest.skip(BWRAP_MISSING)
    hostdir = tmp_path / "host"
    hostdir.mkdir()
    (hostdir / "secret.txt").write_text("the reviewer's\n")
    command = f"cat {hostdir}/secret.txt; echo $LD_LIBRARY_PATH"
    transcript, _ = scripted_session(tmp_path / "s", [call("run_command", command=command)], sandbox="bwrap")
    lines = transcript.read_bytes().split(b"\n")[:-1]
    header = json.loads(lines[0])
    header["env"]["LD_LIBRARY_PATH"] = str(hostdir)
    transcript.write_bytes(rechain([json.dumps(header).encode(), *lines[1:]]))
    (result,) = replay.rerun_commands(steps.load_record(transcript), _rebuilt(transcript, tmp_path / "r")).results
    assert "the reviewer's" not in result.diff and f"+{hostdir}" in result.diff, result.diff


def test_a_variable_redacted_when_recording_is_left_unset_on_rerun_and_named(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(SECRET_VAR, "s3cret-value")
    transcript, _ = scripted_session(tmp_path, [call("run_command", command=f'test -n "${SECRET_VAR}"')])
    record = steps.load_record(transcript)
    assert record.calls[0].structured["exit_code"] == 0, "the unsandboxed command saw the secret"
    assert SECRET_VAR in record.header.env_redacted and SECRET_VAR not in record.header.env
    results = replay.rerun_commands(record, _rebuilt(transcript, tmp_path / "r")).results
    assert [r.verdict for r in results] == ["exit code differs"], "the reviewer's value is not substituted"
    assert replay_command(transcript, tmp_path / "cli", rerun=True) == 1
    out = capsys.readouterr().out
    assert "left unset in the re-run" in out and SECRET_VAR in out


def test_replay_never_writes_through_a_link_left_in_the_destination(tmp_path):
    transcript, _ = scripted_session(tmp_path / "s", [call("write_file", path="d/x.txt", content="recorded\n")])
    record = steps.load_record(transcript)
    dest, outside = tmp_path / "dest", tmp_path / "outside"
    dest.mkdir()
    outside.mkdir()
    os.symlink(outside, dest / "d")
    report = replay.sync(record, dest, steps.END)
    assert os.listdir(outside) == [], "nothing was written through the link"
    assert any("d/x.txt" in p and "symbolic link" in p for p in report.problems), report.problems


@pytest.mark.slow
def test_rerun_of_a_command_that_timed_out_says_so_in_words(tmp_path, capsys):
    transcript, _ = scripted_session(tmp_path, [call("run_command", command="sleep 30", timeout_s=1)])
    assert replay_command(transcript, tmp_path / "cli", rerun=True) in (0, 1)
    out = capsys.readouterr().out
    assert "no exit" in out and "None" not in out, out


@pytest.mark.slow
def test_rerun_of_a_command_leaving_an_8_mib_file_that_differs_finishes_in_bounded_time(tmp_path):
    """The re-run's file diff was difflib's, quadratic in the file: two 8 MiB versions that differ on every other
    line took hours. Now it is summarised, saying where and why, in time linear in the files."""
    gen = (
        "import sys\nlines, size, i = [], 0, 0\nwhile size < 8_000_000:\n"
        "    line = f'{i} {sys.argv[1]}\\n' if i % 2 else f'{i}\\n'\n    lines.append(line)\n"
        "    size += len(line)\n    i += 1\nopen('big.txt', 'w').write(''.join(lines))\n"
    )
    transcript, _ = scripted_session(
        tmp_path / "s",
        [call("write_file", path="gen.py", content=gen), call("run_command", command="python3 gen.py $$")],
    )
    done = jg("replay", transcript, "--to", tmp_path / "r", "--rerun", timeout=60)  # TimeoutExpired fails it
    assert done.returncode == 0, done.stdout + done.stderr
    assert "files that differ from the recording: big.txt" in done.stdout
    assert "(not compared line by line (over 2000 lines a side): lines 2-" in done.stdout
