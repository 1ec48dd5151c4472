""".ci/setup's choices, run as written against stand-in tools (python3, pip, apt-get) that log what they are asked:
the demo's set-up installs no chromium, `--tests` adds what only the tests need, and `JG_SYSTEM_TORCH=1` makes a
virtualenv that sees the node's torch and holds pip to its version. The real installs run in CI's clean clone."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO

FAKE_PYTHON = r"""#!/bin/bash
# A python3 (or a virtualenv's python) that logs its arguments and plays the part .ci/setup needs.
echo "$(basename "$0") $*" >> "$FAKE_LOG"
if [ "$1" = -m ] && [ "$2" = venv ]; then
  shift 2; flag=false; [ "$1" = --system-site-packages ] && { flag=true; shift; }
  mkdir -p "$1/bin" && cp "$0" "$1/bin/python"
  echo "include-system-site-packages = $flag" > "$1/pyvenv.cfg"
  exit 0
fi
if [ "$1" = -c ]; then
  case "$2" in
    *importlib.metadata*) echo "torch==2.5.1+cu124"; exit 0 ;;
    *"import torch"*)
      [ "$FAKE_SYSTEM_TORCH" = 1 ] || exit 1
      [ "$(basename "$0")" = python3 ] && exit 0
      grep -q "= true" "$(dirname "$0")/../pyvenv.cfg"; exit $? ;;
  esac
fi
exit 0
"""


def run_setup(tmp_path: Path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    tmp_path.mkdir(exist_ok=True)
    repo = tmp_path / "repo"
    (repo / ".ci").mkdir(parents=True)
    shutil.copy(REPO / ".ci" / "setup", repo / ".ci" / "setup")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "dirname", "grep", "cat", "basename", "mkdir", "cp"):
        os.symlink(shutil.which(tool), bin_dir / tool)
    (bin_dir / "python3").write_text(FAKE_PYTHON)
    (bin_dir / "apt-get").write_text('#!/bin/bash\necho "apt-get $*" >> "$FAKE_LOG"\n')
    (bin_dir / "id").write_text("#!/bin/bash\necho 0\n")
    for tool in ("python3", "apt-get", "id"):
        (bin_dir / tool).chmod(0o755)
    log = tmp_path / "log"
    log.touch()
    done = subprocess.run(
        [str(bin_dir / "bash"), ".ci/setup", *args],
        cwd=repo,
        env={"PATH": str(bin_dir), "FAKE_LOG": str(log), "HOME": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done, log.read_text().splitlines()


def test_the_demo_setup_installs_nothing_only_the_tests_need_which_tests_adds(tmp_path):
    done, log = run_setup(tmp_path)
    assert done.returncode == 0, done.stderr
    assert "apt-get install -y -qq bubblewrap e2fsprogs" in log and not any("chromium" in line for line in log)
    assert "python3 -m venv .venv" in log
    assert "python -m pip install -q torch==2.13.0" in log
    assert log[-1] == "python -m pip install -q -e ."
    done, log = run_setup(tmp_path / "tests", "--tests")
    assert done.returncode == 0, done.stderr
    assert "apt-get install -y -qq bubblewrap e2fsprogs chromium" in log
    assert log[-2:] == ["python -m pip install -q -e .[test,ray]", "python tests/tools/precompile_torch_header.py"]


def test_system_torch_keeps_the_nodes_torch(tmp_path):
    done, log = run_setup(tmp_path, "--tests", JG_SYSTEM_TORCH="1", FAKE_SYSTEM_TORCH="1")
    assert done.returncode == 0, done.stderr
    assert "python3 -m venv --system-site-packages .venv" in log
    assert not any("torch==2.13.0" in line for line in log), "torch is not reinstalled"
    assert log[-2] == "python -m pip install -q --constraint .venv/jg-torch.txt -e .[test,ray]"
    assert (tmp_path / "repo" / ".venv" / "jg-torch.txt").read_text() == "torch==2.5.1+cu124\n"


@pytest.mark.parametrize("venv_first", [False, True])
def test_system_torch_refuses_a_python_without_torch_or_a_venv_that_cannot_see_it(tmp_path, venv_first):
    if venv_first:
        done, _ = run_setup(tmp_path / "a")
        shutil.copytree(tmp_path / "a" / "repo", tmp_path / "repo")
        shutil.rmtree(tmp_path / "repo" / ".ci")
        done, log = run_setup(tmp_path, JG_SYSTEM_TORCH="1", FAKE_SYSTEM_TORCH="1")
        assert "made without the system's site-packages" in done.stderr
    else:
        done, log = run_setup(tmp_path, JG_SYSTEM_TORCH="1")
        assert "python3 has no torch" in done.stderr
    assert done.returncode == 1 and not any(" pip " in line for line in log)


@pytest.mark.slow
def test_the_tests_setup_precompiles_torch_extension_h_for_torchs_own_flags(tmp_path):
    """What `.ci/setup --tests` runs leaves a torch/extension.h.gch that GCC uses for an extension built with the
    flags torch writes into build.ninja, under another extension's name (`-H` marks a used one with `!`)."""
    pytest.importorskip("torch")
    script = REPO / "tests" / "tools" / "precompile_torch_header.py"
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    if "no C++ compiler" in done.stderr:
        pytest.skip("no C++ compiler: native code cannot be built")
    pch_dir = Path(done.stdout.strip())
    spec = importlib.util.spec_from_file_location("precompile_torch_header", script)
    tool = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(tool)  # type: ignore[union-attr]
    cxx, flags = tool.torch_cflags()
    source = tmp_path / "main.cpp"
    source.write_text("#include <torch/extension.h>\n#include <torch/extension.h>\n")
    compiled = subprocess.run(
        [
            cxx,
            "-DTORCH_EXTENSION_NAME=another",
            *flags,
            "-Winvalid-pch",
            "-H",
            "-c",
            str(source),
            "-o",
            str(tmp_path / "main.o"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "CPATH": str(pch_dir)},
    )
    assert compiled.returncode == 0, compiled.stderr[-2000:]
    assert f"! {pch_dir}/torch/extension.h.gch" in compiled.stderr.splitlines(), compiled.stderr[:2000]
