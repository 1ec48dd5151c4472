"""Input sets made and held by another process and mapped into this one, as the eval's workers map the harness's
buffers (jg_mcp/eval/wire/buffers.py: a dedicated cudaMalloc allocation per tensor, opened here with
cudaIpcOpenMemHandle). h200_check's part `dobench_mapped` times its independent graph on them: does memory mapped
from another process change a graph's time?

    python eval/imported_inputs.py '{"goal": "rope", "shape": "llama3_8b_decode_bs256", "seeds": [1, 2, 3]}'

(the exporting side) prints the Bind message of its buffers, then holds them until its stdin closes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


class Imported:
    """The input sets of one shape, held by a child process and mapped here; `groups` as SharedBinding's."""

    def __init__(self, goal: str, shape: str, seeds: list[int]):
        from jg_mcp.eval.wire.buffers import MappedBinding
        from jg_mcp.eval.wire.messages import Bind

        spec = json.dumps({"goal": goal, "shape": shape, "seeds": seeds})
        self.holder = subprocess.Popen(
            [sys.executable, str(Path(__file__)), spec], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.holder.stdout is not None
        line = self.holder.stdout.readline()
        if not line:
            self.holder.wait()
            raise RuntimeError(f"the process holding the inputs ended with {self.holder.returncode}")
        self.mapped = MappedBinding.map(Bind.model_validate_json(line), [])
        self.groups: list[list[Any]] = self.mapped.groups

    def free(self) -> None:
        """Unmap the sets, then let their holder free them and end."""
        self.mapped.close()
        self.groups = []
        assert self.holder.stdin is not None
        self.holder.stdin.close()
        self.holder.wait(timeout=60)


def hold(spec: dict) -> None:
    """Make the shape's input sets from `spec`'s seeds in buffers of their own, print their Bind message and keep
    them until stdin closes."""
    import torch

    from jg_mcp.eval.wire.buffers import SharedBinding
    from jg_mcp.goals import load_goal

    goal = load_goal(REPO / "goals" / f"{spec['goal']}.yaml")
    dims = next(s.dims for s in goal.goal.shapes if s.name == spec["shape"])
    binding = SharedBinding("imported", "cuda")
    for seed in spec["seeds"]:
        binding.add_copy(list(goal.make_inputs(dims, seed, "cuda")))
    torch.cuda.synchronize()
    print(binding.message().model_dump_json(), flush=True)
    sys.stdin.read()
    binding.free()


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    hold(json.loads(sys.argv[1]))
