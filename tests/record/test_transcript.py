"""Transcripts: hash-chained, flushed per event, readable after a kill; the header records the commands'
environment, never a secret."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from jg_mcp.errors import TranscriptError
from jg_mcp.live.bwrap import Bwrap
from jg_mcp.live.runner import command_env
from jg_mcp.live.sandbox import SandboxLimits
from jg_mcp.live.session import recordable_env
from jg_mcp.record.events import FORMAT_VERSION, GENESIS, Notice, sha256_bytes
from jg_mcp.record.reading import read_transcript
from jg_mcp.record.transcript import TranscriptWriter, blobs_dir
from jg_mcp.scripted import call
from tests.support import bwrap_missing, transcript_header

BWRAP_MISSING = bwrap_missing()


def write(tmp_path, n=3):
    w = TranscriptWriter.open(tmp_path / "run.jsonl")
    w.append(transcript_header())
    for i in range(n):
        w.append(Notice(level="info", message=f"m{i}"))
    return w


def test_chain_links_each_line_to_the_previous(tmp_path):
    write(tmp_path)
    lines = (tmp_path / "run.jsonl").read_bytes().splitlines()
    events = read_transcript(tmp_path / "run.jsonl").events
    assert [e.seq for e in events] == [0, 1, 2, 3]
    assert events[0].prev == GENESIS
    assert all(events[i].prev == sha256_bytes(lines[i - 1]) for i in range(1, 4))


def test_each_event_is_on_disk_before_the_next_call(tmp_path):
    w = write(tmp_path, n=1)
    assert len(read_transcript(w.path).events) == 2
    w.append(Notice(level="info", message="more"))
    assert len(read_transcript(w.path).events) == 3


def test_a_cut_last_line_is_reported_as_truncated(tmp_path):
    w = write(tmp_path)
    with open(w.path, "ab") as fh:
        fh.write(b'{"seq": 4, "prev": "ab')
    result = read_transcript(w.path)
    assert result.truncated and len(result.events) == 4 and not result.closed


@pytest.mark.parametrize("tamper", ["edit", "delete", "swap"])
def test_tampering_is_detected_with_the_line(tmp_path, tamper):
    w = write(tmp_path)
    lines = w.path.read_bytes().splitlines()
    if tamper == "edit":
        lines[2] = lines[2].replace(b"m1", b"m9")
    elif tamper == "delete":
        del lines[2]
    else:
        lines[1], lines[2] = lines[2], lines[1]
    w.path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(TranscriptError) as info:
        read_transcript(w.path)
    assert info.value.line in (2, 3, 4)


def test_blobs_are_content_addressed_and_capped(tmp_path):
    w = TranscriptWriter.open(tmp_path / "run.jsonl")
    (tmp_path / "small").write_bytes(b"small")
    (tmp_path / "big").write_bytes(b"x" * 11)

    def store(name: str) -> tuple[str, int, bool]:
        fd = os.open(tmp_path / name, os.O_RDONLY)
        try:
            return w.store_fd(fd, os.fstat(fd).st_size, cap=10)
        finally:
            os.close(fd)

    digest, size, stored = store("small")
    assert stored and size == 5 and digest == sha256_bytes(b"small")
    assert (w.blobs / digest).read_bytes() == b"small"
    digest, size, stored = store("big")
    assert not stored and size == 11 and digest == sha256_bytes(b"x" * 11) and not (w.blobs / digest).exists()


def test_a_transcript_is_never_overwritten(tmp_path):
    write(tmp_path)
    with pytest.raises(FileExistsError):
        TranscriptWriter.open(tmp_path / "run.jsonl")


def test_head_hash_is_the_hash_of_the_last_line(tmp_path):
    w = write(tmp_path)
    assert w.head_sha256 == sha256_bytes(w.path.read_bytes().splitlines()[-1])


SECRETS = {
    "JG_TEST_API_TOKEN": "s3cret-token-value",
    "JG_TEST_DB_PASSWORD": "s3cret-password-value",
    "JG_TEST_INDEX_URL": "https://user:s3cret-url-password@example.invalid/simple",
}
"""Secrets by name (token, password) and by value (a password in a URL)."""
BASH_OWN = {"PWD", "OLDPWD", "SHLVL", "_"}
"""Variables bash sets itself in every command."""


def recorded(tmp_path, monkeypatch, sandbox: str, command: str):
    """A session whose server has SECRETS and a plain variable in its environment, running `command`."""
    from tests.support import scripted_session

    if sandbox == "bwrap" and BWRAP_MISSING:
        pytest.skip(BWRAP_MISSING)
    for name, value in {**SECRETS, "TRITON_JG_TEST_PLAIN": "plain value"}.items():
        monkeypatch.setenv(name, value)
    transcript, _ = scripted_session(tmp_path, [call("run_command", command=command)], sandbox=sandbox)
    read = read_transcript(transcript)
    response = next(e for e in read.events if e.event == "response" and e.method == "tools/call")
    return transcript, read.events[0], response


@pytest.mark.slow
@pytest.mark.parametrize("sandbox", ["none", "bwrap"])
def test_the_header_records_the_environment_commands_see(tmp_path, monkeypatch, sandbox):
    _, head, response = recorded(tmp_path, monkeypatch, sandbox, "compgen -e")
    seen = set(response.result["structuredContent"]["stdout"].split()) - BASH_OWN
    assert head.format_version == FORMAT_VERSION == 6 and head.sandbox == sandbox
    assert (set(head.env) | set(head.env_redacted)) - BASH_OWN == seen, "every variable the command saw is recorded"
    assert head.env["TRITON_JG_TEST_PLAIN"] == "plain value"
    assert Path(head.env["PATH"].split(os.pathsep)[0]) == Path(sys.executable).parent
    if sandbox == "bwrap":
        assert head.env == Bwrap(Path("ws")).env, "exactly the sandbox's allow-listed environment"
        assert head.env_redacted == [] and head.sandbox_limits == SandboxLimits().model_dump()
    else:
        assert head.env == {k: v for k, v in command_env().items() if k not in head.env_redacted}
        assert set(SECRETS) <= set(head.env_redacted) and head.sandbox_limits is None


@pytest.mark.parametrize("sandbox", ["none", "bwrap"])
def test_no_secret_in_the_servers_environment_reaches_the_transcript(tmp_path, monkeypatch, sandbox):
    # The command checks each secret by its hash, so that the command text itself does not hold it.
    checks = " && ".join(
        f'test "$(printf %s "${name}" | sha256sum)" = "{sha256_bytes(value.encode())}  -"'
        for name, value in SECRETS.items()
    )
    transcript, head, response = recorded(tmp_path, monkeypatch, sandbox, f"{checks}; echo $?")
    saw_them = response.result["structuredContent"]["stdout"] == "0\n"
    assert saw_them == (sandbox == "none"), "unsandboxed commands see the secrets, sandboxed ones do not"
    written = transcript.read_bytes() + b"".join(p.read_bytes() for p in blobs_dir(transcript).iterdir())
    for value in SECRETS.values():
        assert value.encode() not in written
    if sandbox == "none":
        assert set(SECRETS) <= set(head.env_redacted), "named as redacted, since the commands saw them"
    else:
        assert not set(SECRETS) & (set(head.env) | set(head.env_redacted)), "not even named: commands never saw them"


def test_recordable_env_leaves_out_secret_looking_names_and_values():
    env, redacted = recordable_env(
        {
            "HOME": "/root",
            "GITHUB_TOKEN": "x",
            "MY_API_KEY": "x",
            "AWS_PROFILE": "x",
            "PIP_INDEX_URL": "https://u:pw@host/simple",
            "NOTE": "ghp_" + "a" * 36,
            "PROXY": "http://proxy:3128",
            "PATH": "/usr/bin",
        }
    )
    assert env == {"HOME": "/root", "PATH": "/usr/bin", "PROXY": "http://proxy:3128"}
    assert redacted == ["AWS_PROFILE", "GITHUB_TOKEN", "MY_API_KEY", "NOTE", "PIP_INDEX_URL"]


def keyed_session(tmp_path, key: bytes | None) -> Path:
    """A closed session on the demo goal with a write and a command, keyed with `key`."""
    from tests.support import scripted_session

    steps = [call("write_file", path="a.txt", content="one\n"), call("run_command", command="echo two > b.txt")]
    transcript, _ = scripted_session(tmp_path, steps, key=key)
    return transcript


def rechained_edit(transcript: Path) -> Path:
    """The transcript with a file's recorded content changed and the chain re-made, as someone without the
    key could do: seq and prev are right, only the MACs are stale."""
    from tests.support import rechain

    lines = transcript.read_bytes().split(b"\n")[:-1]
    lines = [line.replace(b"echo two", b"echo TWO") for line in lines]
    transcript.write_bytes(rechain(lines))
    return transcript


def test_a_keyed_transcript_audits_authentic_and_a_rechained_one_is_caught_only_with_the_key(tmp_path):
    from jg_mcp.record import audit

    key = b"k" * 32
    transcript = keyed_session(tmp_path, key)
    head = read_transcript(transcript).events[0]
    assert (
        head.format_version == FORMAT_VERSION and head.key_id and all(e.mac for e in read_transcript(transcript).events)
    )
    clean = audit.audit(transcript, key=key)
    assert clean.ok and not [f for f in clean.findings if f.kind == "authenticity"]
    wrong = audit.audit(transcript, key=b"x" * 32)
    assert not wrong.ok and any("another key" in f.message for f in wrong.findings)

    rechained_edit(transcript)
    unkeyed = audit.audit(transcript)
    assert unkeyed.ok, "re-chained, the hash chain alone holds"
    assert [f.severity for f in unkeyed.findings if f.kind == "authenticity"] == ["warning"]
    assert "not checked" in next(f.message for f in unkeyed.findings if f.kind == "authenticity")
    keyed = audit.audit(transcript, key=key)
    assert not keyed.ok
    assert {f.line for f in keyed.findings if f.kind == "authenticity" and f.severity == "error"}, "lines named"


def test_an_unkeyed_transcript_says_authenticity_is_unchecked_and_fails_a_keyed_audit(tmp_path):
    from jg_mcp.record import audit

    transcript = keyed_session(tmp_path, None)
    assert read_transcript(transcript).events[0].key_id is None
    report = audit.audit(transcript)
    assert report.ok and any(f.kind == "authenticity" and f.severity == "warning" for f in report.findings)
    assert any("not keyed" in f.message for f in audit.audit(transcript, key=b"k" * 32).findings)


def test_a_short_or_shared_key_file_is_refused(tmp_path):
    from jg_mcp.record.keys import read_key

    key = tmp_path / "k"
    key.write_bytes(b"short\n")
    key.chmod(0o600)
    with pytest.raises(TranscriptError, match="at least 16"):
        read_key(key)
    key.write_bytes(b"0123456789abcdef0123\n")
    assert read_key(key) == b"0123456789abcdef0123"
    key.chmod(0o644)
    with pytest.raises(TranscriptError, match="chmod 600"):
        read_key(key)


def test_calls_whose_ids_differ_only_in_type_keep_their_own_file_changes(tmp_path):
    """JSON-RPC ids 500 and "500" are two requests: a change recorded for one (late, after a cancelled call's
    response) is not credited to the other."""
    from jg_mcp.record.events import FileChange, Request
    from jg_mcp.record.steps import load_record

    w = TranscriptWriter.open(tmp_path / "run.jsonl")
    w.append(transcript_header())
    w.append(Request(request_id=500, method="tools/call", params={"name": "run_command", "arguments": {}}))
    w.append(Request(request_id="500", method="tools/call", params={"name": "run_command", "arguments": {}}))
    w.append(FileChange(request_id=500, path="a.txt", op="write", sha256="0" * 64, size=1, cause="run_command"))
    w.append(FileChange(request_id="500", path="b.txt", op="write", sha256="1" * 64, size=1, cause="run_command"))
    record = load_record(tmp_path / "run.jsonl")
    assert {c.event.path: c.step for c in record.changes} == {"a.txt": 1, "b.txt": 2}


REFUSING_DISK = """
import resource, signal, sys
from pathlib import Path
from jg_mcp.record.events import Header, Notice
from jg_mcp.record.transcript import TranscriptWriter

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
w = TranscriptWriter.open(Path(sys.argv[1]))
w.append(Header(jg_mcp_version="0", run_id="r", goal="g", goal_sha256="0" * 64, condition="goal-only",
                sandbox="none", workspace="/w", host={}, gpu={}, started_at="t"))
w.append(Notice(level="info", message="before"))
resource.setrlimit(resource.RLIMIT_FSIZE, (w.path.stat().st_size + 40, hard))  # the next line is cut mid-write
for i in range(5):
    w.append(Notice(level="info", message=f"while full {i}"))
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
w.append(Notice(level="info", message="after"))
"""


@pytest.mark.slow
def test_a_disk_that_refuses_writes_mid_line_leaves_every_event_once_in_order_and_says_so(tmp_path):
    """A full disk (here the file size limit: EFBIG after a short write) refuses the transcript's writes for a
    while: nothing cut or repeated stays in the file, the events kept meanwhile are written in order once
    space returns, and a notice says at which seq the disk refused them (not tampering: the audit's chain
    holds)."""
    import subprocess

    from jg_mcp.record.integrity import diagnose

    path = tmp_path / "run.jsonl"
    done = subprocess.run([sys.executable, "-c", REFUSING_DISK, str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    events = read_transcript(path).events
    messages = [e.message for e in events[1:]]
    expected = ["before", *[f"while full {i}" for i in range(5)]]
    assert messages[: len(expected)] == expected and messages[-1] == "after", messages
    notes = [e for e in events if isinstance(e, Notice) and "refused" in e.message]
    assert len(notes) == 1 and notes[0].level == "warning" and "seq 2" in notes[0].message, notes
    assert [p.kind for p in diagnose(path).problems] == ["cut short"]


def test_two_unanswered_requests_with_one_id_are_an_integrity_error_not_a_silent_guess(tmp_path):
    """A transcript (forged, or from a server that served both) where a second request reuses the id of one
    still unanswered: which response and file changes belong to which cannot be known, so the audit says so
    as an integrity error naming both lines; a request refused at once for its id (its error response on the
    next line) pairs with that response and leaves the first call its own."""
    from jg_mcp.record import audit
    from jg_mcp.record.events import FileChange, Request, Response
    from jg_mcp.record.steps import load_record

    def run(name: str, refused: bool) -> Path:
        w = TranscriptWriter.open(tmp_path / name)
        w.append(transcript_header())
        w.append(
            Request(request_id=7, method="tools/call", params={"name": "run_command", "arguments": {"command": "evil"}})
        )
        w.append(
            Request(request_id=7, method="tools/call", params={"name": "run_command", "arguments": {"command": "ok"}})
        )
        if refused:
            w.append(Response(request_id=7, method="tools/call", duration_ms=0, is_error=True, error="id in flight"))
        else:
            w.append(Response(request_id=7, method="tools/call", duration_ms=1, result={}))
        w.append(FileChange(request_id=7, path="evil.txt", op="write", sha256="0" * 64, size=1, cause="run_command"))
        w.append(Response(request_id=7, method="tools/call", duration_ms=2000, result={}))
        return w.path

    refused = load_record(run("refused.jsonl", refused=True))
    assert refused.problems == []
    evil, second = refused.calls
    assert evil.duration_ms == 2000 and not evil.is_error and second.is_error and second.error == "id in flight"
    assert [(c.event.path, c.step) for c in refused.changes] == [("evil.txt", 1)]

    served = run("served.jsonl", refused=False)
    assert [p.line for p in load_record(served).problems] == [3]
    findings = [f for f in audit.audit(served).findings if f.kind == "request id"]
    assert len(findings) == 1 and findings[0].severity == "error" and findings[0].line == 3
    assert "line 2" in findings[0].message and "cannot" in findings[0].message, findings
