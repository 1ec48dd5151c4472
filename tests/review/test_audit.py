"""Audit: integrity findings that name the line, the session summary, policy, and the eval's solution hash."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

from jg_mcp.commands import audit as audit_cli
from jg_mcp.commands.audit import render_text
from jg_mcp.errors import EvalReportError
from jg_mcp.goals import load_goal
from jg_mcp.record import audit, audit_policy
from jg_mcp.record.events import Close, Header, sha256_bytes
from jg_mcp.record.transcript import COMMAND_BLOB_CAP, WRITE_BLOB_CAP, TranscriptWriter, blobs_dir, stored_blob
from jg_mcp.scripted import call
from tests.support import DEMO_GOAL, copy_transcript, demo_dir, demo_run, eval_report, jg, rechain, scripted_session

SOLUTION_WITH_ADD = """import torch
import torch as t
from torch import add as plus


def kernel(x, y, alpha):
    a = t.add(y, x, alpha=alpha.item())
    b = plus(y, x)
    c = getattr(torch, "add")(y, x)
    return y.add(x * alpha) + a - b - c
"""


def tampered(tmp_path: Path, edit) -> tuple[Path, set[tuple[str, int | None]]]:
    """A copy of the demo transcript changed by `edit`, and the findings (kind, line) that must name it."""
    t = copy_transcript(demo_run(), tmp_path / "t")
    lines = t.read_bytes().split(b"\n")[:-1]
    content, expected = edit(lines)
    t.write_bytes(content)
    return t, expected


def response_index(lines: list[bytes]) -> int:
    """Index of the first tools/call response: an ordinary line in the middle of the transcript."""
    return next(i for i, line in enumerate(lines) if b'"event":"response"' in line and b"tools/call" in line)


def kinds(report: audit.AuditReport) -> set[tuple[str, int | None]]:
    return {(f.kind, f.line) for f in report.findings if f.severity == "error"}


@pytest.mark.slow
def test_the_demo_session_audits_clean_with_a_full_summary():
    done = jg("audit", demo_run(), "--json", demo_dir() / "audit.json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "audit clean" in done.stdout
    report = audit.AuditReport.model_validate_json((demo_dir() / "audit.json").read_text())
    s = report.summary
    assert report.closed and s.end_reason == "client disconnected"
    assert s.calls_per_tool == {"query_gpu": 1, "read_file": 2, "write_file": 2, "run_command": 2}
    assert s.gpu_queries == 1
    assert [(c.step, c.exit_code) for c in s.commands] == [(5, 0), (6, 0)]
    assert s.commands[0].duration_s > 0 and 0 < s.command_time_s <= s.wall_time_s
    assert {w.path for w in s.files_written if w.step > 0} == {"solution.py", "check.py", "listing.txt"}
    assert s.solution_sha256 == sha256_bytes((demo_dir() / "workspace" / "solution.py").read_bytes())
    refused = [f for f in report.findings if f.kind == "refused"]
    assert len(refused) == 1 and "/etc/passwd" in refused[0].message and refused[0].severity == "warning"


def _change_a_byte(lines):
    i = response_index(lines)
    lines[i] = lines[i].replace(b'"duration_ms":', b'"duration_ms":9', 1)
    return b"\n".join(lines) + b"\n", {("edited", i + 1)}


def _break_json(lines):
    i = response_index(lines)
    lines[i] = lines[i][:-1] + b"]"
    return b"\n".join(lines) + b"\n", {("invalid line", i + 1)}


def _delete_line(lines):
    i = response_index(lines) + 2
    del lines[i]
    return b"\n".join(lines) + b"\n", {("deleted", i + 1)}


def _swap_lines(lines):
    i = response_index(lines) + 3
    lines[i], lines[i + 1] = lines[i + 1], lines[i]
    return b"\n".join(lines) + b"\n", {("reordered", i + 1), ("reordered", i + 2)}


def _truncate_mid_line(lines):
    return b"\n".join(lines[:20]) + b"\n" + lines[20][:37], {("truncated", 21), ("cut short", 20)}


def _drop_the_end(lines):
    return b"\n".join(lines[:-3]) + b"\n", {("cut short", len(lines) - 3)}


def _edit_the_close_manifest(lines):
    close = json.loads(lines[-1])
    close["manifest"]["solution.py"]["sha256"] = "0" * 64
    return b"\n".join([*lines[:-1], json.dumps(close).encode()]) + b"\n", {("manifest", len(lines))}


EDITS = {
    "one byte changed": _change_a_byte,
    "line made invalid": _break_json,
    "line deleted": _delete_line,
    "lines swapped": _swap_lines,
    "truncated mid-line": _truncate_mid_line,
    "end removed": _drop_the_end,
    "close manifest edited": _edit_the_close_manifest,
}


@pytest.mark.slow
@pytest.mark.parametrize("name", EDITS)
def test_tampering_with_the_transcript_is_detected_and_named(tmp_path, name):
    t, expected = tampered(tmp_path, EDITS[name])
    report = audit.audit(t)
    assert expected <= kinds(report), report.findings
    assert not report.ok
    text = render_text(report)
    assert "audit FAILED" in text
    for kind, line in expected:
        assert f"integrity/{kind}: line {line}:" in text, text


@pytest.mark.slow
def test_the_command_line_names_the_tampered_line_and_exits_1(tmp_path):
    t, expected = tampered(tmp_path, _delete_line)
    done = jg("audit", t)
    assert done.returncode == 1 and "audit FAILED" in done.stdout
    kind, line = next(iter(expected))
    assert f"ERROR   integrity/{kind}: line {line}: seq {line - 1} is missing" in done.stdout, done.stdout


@pytest.mark.slow
def test_an_edit_is_blamed_on_the_edited_line_alone(tmp_path):
    t, expected = tampered(tmp_path, _change_a_byte)
    report = audit.audit(t)
    assert kinds(report) == expected
    assert f"line {next(iter(expected))[1]} was altered" in report.findings[0].message


@pytest.mark.slow
def test_a_changed_stored_blob_is_detected_and_named(tmp_path):
    t = copy_transcript(demo_run(), tmp_path / "t")
    record_line = next(
        i
        for i, line in enumerate(t.read_text().splitlines(), 1)
        if '"path":"solution.py"' in line and '"file_change"' in line
    )
    blob = next(p for p in blobs_dir(t).iterdir() if p.read_bytes().startswith(b"import torch\nimport triton"))
    blob.write_bytes(blob.read_bytes().replace(b"alpha * x + y", b"alpha * x - y"))
    report = audit.audit(t)
    blob_findings = [f for f in report.findings if f.kind == "blob"]
    assert [f.line for f in blob_findings] == [record_line]
    assert blob.name in blob_findings[0].message and "solution.py" in blob_findings[0].message
    assert not report.ok
    blob.unlink()
    assert any("missing" in f.message for f in audit.audit(t).findings if f.kind == "blob")


@pytest.mark.slow
def test_a_blob_named_by_a_path_is_an_invalid_line_and_blobs_are_read_bounded_without_links(tmp_path):
    """A transcript names its blobs and whoever wrote it chose both: a name that is not a sha256 (an absolute path,
    `..`) fails the line, and no reviewer's tool opens it; a link in the store is not followed, and a blob larger
    than any the writer stores is read no further than one byte past that."""
    t = copy_transcript(demo_run(), tmp_path / "t")
    lines = t.read_bytes().splitlines()
    at = next(i for i, line in enumerate(lines) if b'"path":"solution.py"' in line and b'"file_change"' in line)
    secret = tmp_path / "secret"
    secret.write_bytes(b"not the reviewer's to open")
    for name in (str(secret), f"../../{secret.name}"):
        event = json.loads(lines[at])
        event["sha256"] = name
        crafted = tmp_path / name.replace("/", "_") / t.name
        crafted.parent.mkdir()
        crafted.write_bytes(rechain([*lines[:at], json.dumps(event).encode(), *lines[at + 1 :]]))
        found = audit.audit(crafted).findings
        assert [f.kind for f in found if f.line == at + 1] == ["invalid line"], found

    blob = blobs_dir(t) / json.loads(lines[at])["sha256"]
    data = blob.read_bytes()
    blob.unlink()
    (tmp_path / "outside").write_bytes(data)
    blob.symlink_to(tmp_path / "outside")
    assert stored_blob(blobs_dir(t), blob.name) is None
    assert any("missing" in f.message for f in audit.audit(t).findings if f.kind == "blob")
    blob.unlink()
    with blob.open("wb") as f:
        f.write(data)
        f.truncate(4 * WRITE_BLOB_CAP)
    assert len(stored_blob(blobs_dir(t), blob.name) or b"") == max(WRITE_BLOB_CAP, COMMAND_BLOB_CAP) + 1
    assert any("altered" in f.message for f in audit.audit(t).findings if f.kind == "blob")


@pytest.mark.slow
def test_audit_eval_report_accepts_the_same_solution_and_catches_a_swapped_one(tmp_path, capsys):
    final = sha256_bytes((demo_dir() / "workspace" / "solution.py").read_bytes())
    goal_sha = load_goal(DEMO_GOAL).sha256()
    same, swapped = tmp_path / "same.json", tmp_path / "swapped.json"
    same.write_text(json.dumps(eval_report(final, goal_sha)))
    swapped.write_text(json.dumps(eval_report(sha256_bytes(b"def kernel(x, y, alpha):\n    return x\n"), goal_sha)))
    assert audit.audit(demo_run(), same).ok
    args = argparse.Namespace(
        transcript=demo_run(), eval_report=swapped, goal=None, json=None, html=None, key_file=None
    )
    assert audit_cli.run(args) == 1
    out = capsys.readouterr().out
    assert "ERROR   eval/eval" in out and final in out
    other_goal = tmp_path / "other_goal.json"
    other_goal.write_text(json.dumps(eval_report(final, "f" * 64)))
    assert [f.kind for f in audit.audit(demo_run(), other_goal).findings if f.severity == "error"] == ["eval"]


def test_policy_flags_network_escapes_protected_writes_and_forbidden_apis(tmp_path):
    transcript, _ = scripted_session(
        tmp_path,
        [
            call("run_command", command="true || curl -s https://example.invalid/x"),
            call("run_command", command="cat /etc/hostname > host.txt; cd .. && ls > /dev/null"),
            call("write_file", path="reference.py", content="# mine now\n"),
            call("run_command", command="chmod u+w reference.py; echo '# changed' >> reference.py"),
            call("write_file", path="solution.py", content=SOLUTION_WITH_ADD),
            call("run_command", command='python -c "print(4 / 2)" 2>/dev/null && sed "s/a/b/" solution.py > /dev/null'),
        ],
    )
    report = audit.audit(transcript)
    errors = [f for f in report.findings if f.severity == "error"]
    by_kind = {k: [f.message for f in errors if f.kind == k] for k in {f.kind for f in errors}}
    assert any("curl" in m for m in by_kind["network"]) and any("https://" in m for m in by_kind["network"])
    assert any("/etc/hostname" in m for m in by_kind["outside workspace"])
    assert any("'..'" in m for m in by_kind["outside workspace"])
    assert not [f for f in report.findings if "step 6" in f.message], "a harmless command is not flagged"
    protected = [f for f in report.findings if f.kind == "protected file"]
    assert any(f.severity == "warning" and "refused" in f.message for f in protected)
    assert any(f.severity == "error" and "run_command" in f.message for f in protected)
    forbidden = by_kind["forbidden api"]
    assert {m.split("its line ")[1].split(":")[0] for m in forbidden} >= {"3", "7", "8", "9", "10"}
    assert not report.ok


def test_a_session_over_its_budget_and_a_changed_goal_are_policy_errors(tmp_path):
    loaded = load_goal(DEMO_GOAL)
    start = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    path = tmp_path / "t" / "long.jsonl"
    w = TranscriptWriter.open(path)
    w.append(
        Header(
            jg_mcp_version="0.1.0",
            run_id="long",
            goal="axpy",
            goal_sha256=loaded.sha256(),
            condition="goal-only",
            sandbox="none",
            workspace=str(tmp_path / "ws"),
            host={},
            gpu={},
            started_at=start.isoformat(),
        )
    )
    w.append(Close(reason="client disconnected", ended_at=(start + timedelta(minutes=11)).isoformat(), manifest={}))
    report = audit.audit(path)
    assert [f.kind for f in report.findings if f.severity == "error"] == ["budget"]
    assert any("took 660s, the goal allows 600s" in f.message for f in report.findings)
    changed = tmp_path / "goal"
    changed.mkdir()
    for suffix in (".yaml", ".py"):
        shutil.copy(DEMO_GOAL.with_suffix(suffix), changed / f"axpy{suffix}")
    (changed / "axpy.yaml").write_text((changed / "axpy.yaml").read_text() + "# edited\n")
    report = audit.audit(path, goal_path=changed / "axpy.yaml")
    assert {f.kind for f in report.findings if f.severity == "error"} == {"budget", "goal"}


@pytest.mark.parametrize(
    "command",
    [
        "pip install numpy",
        "python -m pip download x",
        "wget http://x",
        "ssh host",
        "git clone repo",
        "ls /home",
        "cat ~/.ssh/id_rsa",
        "cd .. ",
        "echo $HOME",
    ],
)
def test_command_text_patterns_that_leave_the_sandbox_are_recognised(command):
    assert audit_policy.command_findings(command, "/ws")


@pytest.mark.parametrize(
    "command",
    [
        "python check.py",
        "ls -la > listing.txt && wc -l listing.txt",
        "TRITON_INTERPRET=1 python check.py 2>/dev/null",
        "cat /ws/solution.py",
        "nvidia-smi",
        "python -c 'print(1 / 2)'",
        "sed 's/a/b/' x.py",
        "/usr/bin/env python x.py",
        "cp a.py b.py",
        "./run.sh",
    ],
)
def test_ordinary_commands_are_not_flagged(command):
    assert audit_policy.command_findings(command, "/ws") == []


def test_the_forbidden_api_scan_resolves_aliases_and_getattr():
    uses = audit_policy.forbidden_uses(SOLUTION_WITH_ADD, ["torch.add", "torch.Tensor.add"])
    assert {line for line, _ in uses} == {3, 7, 8, 9, 10}
    assert (
        audit_policy.forbidden_uses(
            "import torch\n\ndef kernel(x):\n    return torch.mul(x, 2) + x\n", ["torch.add", "torch.Tensor.add"]
        )
        == []
    )


def test_files_the_scan_could_not_record_fail_the_audit_and_pycache_is_named(tmp_path, monkeypatch):
    from jg_mcp.live import workspace_scan

    monkeypatch.setattr(workspace_scan, "SCAN_LIMIT", 3)
    steps = [
        call(
            "run_command",
            command="mkdir -p a/__pycache__ z && echo 'x = 1' > a/m.py && python -c \"import py_compile; "
            "py_compile.compile('a/m.py', cfile='a/__pycache__/m.pyc')\" && "
            "for i in 1 2 3 4 5; do echo $i > z/f$i.txt; done",
        )
    ]
    transcript, _ = scripted_session(tmp_path, steps)
    report = audit.audit(transcript, goal_path=DEMO_GOAL)
    errors = [f.message for f in report.findings if f.severity == "error"]
    assert not report.ok and any("scan incomplete" in m and "past the first 3" in m for m in errors), errors
    warnings = [f.message for f in report.findings if f.severity == "warning"]
    assert any("a/__pycache__/m.pyc" in m and "not recorded" in m for m in warnings), warnings


@pytest.mark.slow
def test_serve_with_a_transcript_key_then_audit_with_it_catches_a_rechained_edit(tmp_path):
    from mcp import StdioServerParameters

    from jg_mcp.scripted import run_script
    from tests.support import rechain

    key = tmp_path / "key"
    key.write_bytes(b"a transcript key of some length\n")
    key.chmod(0o600)
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "jg_mcp",
            "serve",
            "--goal",
            str(DEMO_GOAL),
            "--workspace",
            str(tmp_path / "ws"),
            "--transcripts",
            str(tmp_path / "tr"),
            "--sandbox",
            "none",
            "--transcript-key-file",
            str(key),
        ],
    )
    anyio.run(run_script, params, [call("run_command", command="echo made > out.txt")], 120)
    transcript = next((tmp_path / "tr").glob("*.jsonl"))
    assert jg("audit", transcript, "--goal", DEMO_GOAL, "--key-file", key).returncode == 0
    unkeyed = jg("audit", transcript, "--goal", DEMO_GOAL)
    assert unkeyed.returncode == 0 and "authenticity not checked" in unkeyed.stdout

    lines = transcript.read_bytes().split(b"\n")[:-1]
    transcript.write_bytes(rechain([line.replace(b"echo made", b"echo MADE") for line in lines]))
    assert jg("audit", transcript, "--goal", DEMO_GOAL).returncode == 0, "the chain alone cannot tell"
    done = jg("audit", transcript, "--goal", DEMO_GOAL, "--key-file", key)
    assert done.returncode == 1 and "no valid MAC under the key" in done.stdout


def test_the_text_report_says_in_words_what_has_no_value(tmp_path):
    """A session that left no solution and whose commands have no exit code (refused, timed out) reads in
    words: no Python None anywhere."""
    transcript, _ = scripted_session(
        tmp_path,
        [
            call("run_command", command="echo a\0b"),
            call("run_command", command="sleep 30", timeout_s=1),
            call("run_command", command="true"),
        ],
    )
    judged = tmp_path / "eval.json"
    judged.write_text(json.dumps(eval_report("a" * 64, load_goal(DEMO_GOAL).sha256())))
    report = audit.audit(transcript, judged)
    text = render_text(report)
    assert "None" not in text, text
    assert "no solution.py at the end of the session" in text
    assert [line.split("  $ ")[0].split(maxsplit=2)[2] for line in text.splitlines() if "  $ " in line] == [
        "REFUSED",
        f"TIMED OUT after {report.summary.commands[1].duration_s:.2f}s",
        f"exit 0 {report.summary.commands[2].duration_s:.2f}s",
    ]
    assert "the transcript has no solution.py at the end of the session" in text


@pytest.mark.slow
def test_a_malformed_eval_report_is_one_line_naming_the_file_not_a_traceback(tmp_path, capsys):
    broken, partial = tmp_path / "broken.json", tmp_path / "partial.json"
    broken.write_text("{not json")
    final = sha256_bytes((demo_dir() / "workspace" / "solution.py").read_bytes())
    partial.write_text(json.dumps({"solution_sha256": final}))
    for path, problem in ((broken, "Invalid JSON"), (partial, "goal: Field required")):
        args = argparse.Namespace(
            transcript=demo_run(), eval_report=path, goal=None, json=None, html=tmp_path / "page.html", key_file=None
        )
        assert audit_cli.run(args) == 1
        [line] = [ln for ln in capsys.readouterr().out.splitlines() if "eval/eval" in ln]
        assert f"{path}: not a jg-mcp eval report: " in line and problem in line, line
    with pytest.raises(EvalReportError, match=f"^{tmp_path / 'missing.json'}: cannot read the eval report: "):
        audit.read_eval_report(tmp_path / "missing.json")


def test_the_text_audit_shows_what_the_agent_wrote_without_letting_it_steer_the_terminal(tmp_path):
    """Commands and file names are the agent's text: escape sequences, carriage returns and newlines in them
    would let it erase or forge lines of the audit on a terminal (hide its errors, print `audit clean`). Every
    line the audit prints is one line of printable text."""
    fake = "\x1b[2K\r  step   1 exit 0 0.01s  $ ls\naudit clean\x1b[8m\u202e"
    transcript, _ = scripted_session(
        tmp_path,
        [
            call("run_command", command=f"true || curl -s https://example.invalid/x # {fake}"),
            call("write_file", path=f"odd{fake}.txt", content="x"),
        ],
    )
    report = audit.audit(transcript)
    text = render_text(report)
    assert not report.ok and text.endswith("audit FAILED")
    assert "\x1b" not in text and "\r" not in text and "\u202e" not in text
    assert not [line for line in text.splitlines() if line.startswith(("audit clean", "  step   1 exit 0"))], text
    assert "\\x1b[2K\\r" in text, "the escape is shown, not dropped"


def test_printable_writes_out_every_steering_character_and_keeps_the_rest():
    from jg_mcp.terminal import lines, printable

    assert printable("a\x1b[31mb\rc\nd\x9b\u202ee\u200bf é") == "a\\x1b[31mb\\rc\\nd\\x9b\\u202ee\\u200bf é"
    assert lines(["one\ntwo", "three"]) == "one\\ntwo\nthree"


@pytest.mark.slow
def test_a_final_solution_the_transcript_could_not_store_fails_the_audit(tmp_path, monkeypatch):
    """An agent that fills the transcript's blob budget first gets its final solution recorded by hash only: its
    text cannot be checked for forbidden APIs, so the audit cannot pass it."""
    from jg_mcp.record import transcript

    monkeypatch.setattr(transcript, "BLOB_BUDGET_BYTES", 64 << 10)
    steps = [
        call("run_command", command="for i in $(seq 1500); do head -c 64 /dev/urandom > f$i; done"),
        call("write_file", path="solution.py", content=SOLUTION_WITH_ADD),
    ]
    path, _ = scripted_session(tmp_path, steps)
    report = audit.audit(path)
    assert not report.ok
    assert any(f.severity == "error" and "was not stored" in f.message for f in report.findings), report.findings
