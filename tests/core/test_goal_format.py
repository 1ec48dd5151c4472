"""A malformed goal fails with one clear message naming the file and the field."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from jg_mcp.errors import GoalError
from jg_mcp.goals import load_goal
from tests.support import copy_goal, serve_argv


def _edit(path, fn):
    data = yaml.safe_load(path.read_text())
    fn(data)
    path.write_text(yaml.safe_dump(data))


CASES = {
    "missing field": (lambda d: d.pop("objective"), "objective", "Field required"),
    "unknown key": (lambda d: d.update(objectiv="typo"), "objectiv", "unknown key; did you mean 'objective'?"),
    "wrong type": (lambda d: d["tolerance"].update(atol="tight"), "tolerance.atol", "valid number"),
    "missing callable": (lambda d: d.update(reference="no_such_fn"), "reference", "'no_such_fn' is not a callable"),
    "missing baseline callable": (
        lambda d: d["baselines"]["cublaslt_rowwise"].update(function="nope"),
        "baselines.cublaslt_rowwise.function",
        "'nope' is not a callable",
    ),
    "negative dimension": (lambda d: d["shapes"][0]["dims"].update(M=-1), "shapes.0.dims", "positive"),
    "misspelt nested key": (
        lambda d: d.update(tolerance={"atoll": 0.1, "rtol": 0.1}),
        "tolerance.atoll",
        "did you mean 'atol'?",
    ),
    "smoke shape outside the domain": (
        lambda d: d["smoke_shapes"][1]["dims"].update(N=80),
        "",
        "smoke_shapes 'ragged': N=80 is not a multiple of 64 (shape_domain N: 64..28672, multiple of 64)",
    ),
    "timed shape outside the domain": (
        lambda d: d["shapes"][0]["dims"].update(K=64),
        "",
        "shapes 'llama3_8b_prefill_qkv': K=64 is outside 128..28672",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_goal_names_file_and_field(tmp_path, case):
    edit, field, text = CASES[case]
    path = copy_goal(tmp_path)
    _edit(path, edit)
    with pytest.raises(GoalError) as info:
        load_goal(path)
    assert info.value.field == field
    assert str(path) in str(info.value)
    assert text in str(info.value)


def test_a_misspelt_required_key_is_named_first_with_a_suggestion(tmp_path):
    """The typo is the cause; the required key it leaves missing is the consequence, listed after."""
    path = copy_goal(tmp_path)
    _edit(path, lambda d: d.update(tolerence=d.pop("tolerance")))
    with pytest.raises(GoalError) as info:
        load_goal(path)
    assert info.value.field == "tolerence"
    assert info.value.problem == "unknown key; did you mean 'tolerance'? (also tolerance: Field required)"


def test_yaml_syntax_error_is_reported_with_file(tmp_path):
    path = copy_goal(tmp_path)
    path.write_text(path.read_text() + "\nshapes: [unclosed\n")
    with pytest.raises(GoalError, match="YAML syntax error") as info:
        load_goal(path)
    assert str(path) in str(info.value)


def test_goal_module_import_error_is_reported(tmp_path):
    path = copy_goal(tmp_path)
    path.with_suffix(".py").write_text("raise RuntimeError('boom')\n")
    with pytest.raises(GoalError, match="import failed: RuntimeError: boom"):
        load_goal(path)


def test_name_must_match_file(tmp_path):
    path = copy_goal(tmp_path)
    path.rename(tmp_path / "other.yaml")
    (tmp_path / "gemm_fp8.py").rename(tmp_path / "other.py")
    with pytest.raises(GoalError, match="differs from the file name") as info:
        load_goal(tmp_path / "other.yaml")
    assert info.value.field == "name"


@pytest.mark.slow
@pytest.mark.parametrize("case", ["unknown key", "missing callable"])
def test_cli_prints_one_line_and_exits_1(tmp_path, case):
    edit, field, _ = CASES[case]
    path = copy_goal(tmp_path)
    _edit(path, edit)
    proc = subprocess.run(
        [sys.executable, "-m", "jg_mcp", "goals", "validate", str(path)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 1
    lines = [ln for ln in proc.stderr.splitlines() if "FAILED" in ln]
    assert len(lines) == 1 and field in lines[0] and str(path) in lines[0]


@pytest.mark.slow
def test_serve_with_bad_goal_exits_1_with_message(tmp_path):
    path = copy_goal(tmp_path)
    _edit(path, lambda d: d.pop("shapes"))
    proc = subprocess.run(
        serve_argv("--transcripts", tmp_path / "t", goal=path),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 1
    assert "field 'shapes'" in proc.stderr and "Traceback" not in proc.stderr


def test_a_goal_loaded_without_its_module_imports_it_when_first_used(tmp_path):
    """A server or an audit loads a goal without importing its module (which imports torch): the goal loads, and
    the module's import error shows when the module is first needed, as the eager load shows it."""
    path = copy_goal(tmp_path)
    module = path.with_suffix(".py")
    module.write_text(module.read_text() + "\nraise RuntimeError('boom')\n")
    loaded = load_goal(path, import_module=False)
    assert loaded.reference_parameters() == ["a", "b", "scale_a", "scale_b"]
    with pytest.raises(GoalError, match="import failed: RuntimeError: boom"):
        loaded.module  # noqa: B018


@pytest.mark.parametrize("case", ["missing callable", "missing baseline callable"])
def test_a_goal_naming_an_undefined_function_fails_without_running_its_module(tmp_path, case):
    edit, field, _ = CASES[case]
    path = copy_goal(tmp_path)
    _edit(path, edit)
    ran = tmp_path / "ran"
    module = path.with_suffix(".py")
    module.write_text(f"open({str(ran)!r}, 'w').close()\n" + module.read_text())
    with pytest.raises(GoalError, match="is not defined at the top level of gemm_fp8.py") as info:
        load_goal(path, import_module=False)
    assert info.value.field == field and not ran.exists()


def test_a_goal_module_with_a_syntax_error_fails_to_load_naming_the_line(tmp_path):
    path = copy_goal(tmp_path)
    path.with_suffix(".py").write_text("def reference(a, b:\n")
    with pytest.raises(GoalError, match="gemm_fp8.py line 1: syntax error"):
        load_goal(path, import_module=False)


@pytest.mark.slow
def test_a_goals_text_and_a_server_start_import_no_torch(tmp_path):
    """The agent's goal text names the reference's parameters as the imported function has them, read without
    importing its module; and the real server starts serving a goal without importing torch."""
    import inspect

    from jg_mcp.goal_text import render_markdown
    from tests.support import REPO

    for yaml_path in sorted((REPO / "goals").glob("*.yaml")):
        lazy, eager = load_goal(yaml_path, import_module=False), load_goal(yaml_path)
        assert lazy.reference_parameters() == list(inspect.signature(eager.reference).parameters), yaml_path
        assert render_markdown(lazy) == render_markdown(eager)
    argv = serve_argv("--transcripts", tmp_path / "t", "--workspace", tmp_path / "ws")
    proc = subprocess.Popen(
        [sys.executable, "-X", "importtime", *argv[1:]],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    init = '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
    init += '"capabilities":{},"clientInfo":{"name":"t","version":"0"}}}\n'
    out, err = proc.communicate(init.encode(), timeout=120)
    assert b'"result"' in out and b"session started" in err
    imported = [line.rsplit("|", 1)[-1].strip() for line in err.decode().splitlines() if line.startswith("import time")]
    assert "jg_mcp.live.server" in imported and "torch" not in imported
