"""Every file or directory a command writes is checked as serve's directories are: no link, no other user's
directory on the way, no directory others can write; and a report file is never written through a link.

Run as root (as CI and deployments run): the other local user is uid 65534, who plants links and owns
directories."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jg_mcp import cli
from jg_mcp.errors import UsageError
from jg_mcp.live import places
from jg_mcp.scripted import call
from tests.support import DEMO_GOAL, scripted_session

OTHER = 65534
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="planting as another user needs root")


@pytest.fixture(scope="module")
def transcript(tmp_path_factory: pytest.TempPathFactory) -> Path:
    t, _ = scripted_session(tmp_path_factory.mktemp("s"), [call("write_file", path="a.pth", content="import os\n")])
    return t


def plant(tmp_path: Path, case: str, is_dir: bool) -> tuple[Path, Path]:
    """Where the command is told to write, planted as `case`; and what must stay untouched (the link's target, or
    the directory the output would land in)."""
    victim = tmp_path / "victim"
    victim.mkdir()
    if not is_dir:
        (victim / "keep").write_text("untouched")
    if case == "link":
        shared = tmp_path / "shared"
        shared.mkdir()
        shared.chmod(0o1777)
        target = shared / "out"
        os.symlink(victim if is_dir else victim / "keep", target)
        os.lchown(target, OTHER, OTHER)
        return target, victim
    if case == "other user's directory":
        victim.chmod(0o755)
        os.chown(victim, OTHER, OTHER)
    else:
        victim.chmod(0o777)
    return victim / "out", victim


def snapshot(victim: Path) -> dict[str, bytes]:
    return {str(p.relative_to(victim)): p.read_bytes() if p.is_file() else b"" for p in victim.rglob("*")}


COMMANDS = {
    "replay --to": (True, lambda t, out, ws: ["replay", t, "--to", out, "--rerun"]),
    "audit --json": (False, lambda t, out, ws: ["audit", t, "--json", out]),
    "audit --html": (False, lambda t, out, ws: ["audit", t, "--html", out]),
    "eval --json": (False, lambda t, out, ws: ["eval", "--goal", DEMO_GOAL, "--workspace", ws, "--json", out]),
    "eval --markdown": (False, lambda t, out, ws: ["eval", "--goal", DEMO_GOAL, "--workspace", ws, "--markdown", out]),
    "goals validate --json": (False, lambda t, out, ws: ["goals", "validate", DEMO_GOAL, "--json", out]),
    "demo --out": (True, lambda t, out, ws: ["demo", "--out", out]),
}


@needs_root
@pytest.mark.parametrize("case", ["link", "other user's directory", "directory others can write"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_command_refuses_to_write_where_another_user_could_redirect_it(command, case, transcript, tmp_path, capsys):
    """`replay --to` followed a link another user planted (root rebuilt the agent's files, a .pth included, where
    that user chose, and --rerun handed them to the sandbox's uid); report files were written through links and
    into directories others could swap. Each is now a usage error naming the problem, before any work."""
    is_dir, argv = COMMANDS[command]
    out, victim = plant(tmp_path, case, is_dir)
    before = snapshot(victim)
    ws = tmp_path / "ws"
    ws.mkdir()
    assert cli.main([str(a) for a in argv(transcript, out, ws)]) == 2
    err = capsys.readouterr().err
    assert "no other user can write or replace" in err, err
    assert snapshot(victim) == before


@needs_root
def test_an_output_file_is_never_written_through_a_link_planted_after_the_check(tmp_path, monkeypatch):
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    out = tmp_path / "report.json"
    os.symlink(victim, out)
    monkeypatch.setattr(places, "check_output", lambda path, what: None)  # the link came after the check
    places.write_output(out, "{}", "--json")
    assert victim.read_text() == "untouched"
    assert not out.is_symlink() and out.read_text() == "{}"


def test_an_output_file_of_ours_is_replaced_and_a_fresh_one_made(tmp_path):
    out = tmp_path / "report.json"
    places.write_output(out, "one", "--json")
    places.write_output(out, "two", "--json")
    assert out.read_text() == "two"
    out.chmod(0o666)
    with pytest.raises(UsageError, match="writable by other users"):
        places.write_output(out, "three", "--json")
