"""A session refuses a workspace that another local user could plant, replace or redirect (red team, round 5):
the workspace is handed to the sandbox's uid and bound read-write, so a planted one hands over what it names."""

from __future__ import annotations

import os

import pytest

from jg_mcp.cli import main
from jg_mcp.errors import UsageError
from jg_mcp.live.session import Session
from jg_mcp.live.session_place import SessionConfig


def make(goal, tmp_path, ws):
    return Session.open(
        goal, SessionConfig(workspace_dir=ws, transcripts_dir=tmp_path / "tr", runs_dir=tmp_path / "runs")
    )


def test_a_workspace_below_a_directory_every_user_can_write_is_refused(gemm_goal, tmp_path):
    pub = tmp_path / "pub"
    pub.mkdir()
    pub.chmod(0o777)
    with pytest.raises(UsageError, match=r"pub is writable by other users \(mode 777, not sticky\)"):
        make(gemm_goal, tmp_path, pub / "ws")
    assert not (pub / "ws").exists()


def test_a_workspace_that_is_a_symbolic_link_is_refused_and_its_target_left_alone(gemm_goal, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o700)
    (tmp_path / "ws").symlink_to(victim)
    with pytest.raises(UsageError, match="is a symbolic link"):
        make(gemm_goal, tmp_path, tmp_path / "ws")
    assert list(victim.iterdir()) == []


def test_a_workspace_another_user_made_first_is_refused(gemm_goal, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("giving a directory to another uid needs root")
    ws = tmp_path / "ws"
    ws.mkdir(mode=0o755)
    os.chown(ws, 65534, 65534)
    with pytest.raises(UsageError, match="belongs to uid 65534"):
        make(gemm_goal, tmp_path, ws)
    assert list(ws.iterdir()) == []


def test_a_fresh_workspace_in_a_private_directory_is_made_0700(gemm_goal, tmp_path):
    tmp_path.chmod(0o700)
    session = make(gemm_goal, tmp_path, tmp_path / "a" / "ws")
    try:
        assert (tmp_path / "a" / "ws" / "reference.py").is_file()
        assert (tmp_path / "a").stat().st_mode & 0o777 == 0o700
    finally:
        session.close("test finished")


def test_serve_refuses_a_workspace_link_in_one_line_before_anything_is_made(tmp_path, capsys):
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o700)
    (tmp_path / "ws").symlink_to(victim)
    code = main(["serve", "--goal", "gemm_fp8", "--workspace", str(tmp_path / "ws"), "--runs", str(tmp_path / "runs")])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("jg-mcp serve: --workspace ") and "is a symbolic link" in err[-1]
    assert list(victim.iterdir()) == []
