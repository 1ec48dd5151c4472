"""What the agent is told: the goal rendered as Markdown, and the goal-only instruction."""

from __future__ import annotations

from typing import Literal

from jg_mcp.goals import LoadedGoal, Shape

Policy = Literal["open", "triton"]


def _shape_rows(shapes: list[Shape]) -> list[str]:
    return [f"| {s.name} | " + ", ".join(f"{k}={v}" for k, v in s.dims.items()) + " |" for s in shapes]


def _signature(loaded: LoadedGoal) -> str:
    params = ", ".join(loaded.reference_parameters())
    return f"{loaded.goal.solution.function}({params})"


def rules(loaded: LoadedGoal, policy: Policy = "open") -> str:
    """The eval's rules as the agent reads them: the open policy's few sentences, or the Triton-only allow-list."""
    if policy == "triton":
        from jg_mcp.policy.check import policy_text

        return policy_text(loaded.goal.forbidden)
    from jg_mcp.policy.open_policy import open_rules

    return open_rules(loaded.goal.forbidden)


def render_markdown(loaded: LoadedGoal, reference_file: str = "reference.py", policy: Policy = "open") -> str:
    g = loaded.goal
    outputs = ", ".join(f"`{o.name}` ({o.dtype})" for o in g.outputs)
    lines = [
        f"# Goal: {g.title}",
        "",
        "## Objective",
        g.objective,
        "",
        "## Constraints",
        *[f"- {c}" for c in g.constraints],
        f"- {rules(loaded, policy)}",
        "",
        "## Solution contract",
        f"- File `{g.solution.file}` in the workspace defines `{_signature(loaded)}` "
        f"with the same positional arguments as `{g.reference}` in `{reference_file}`.",
        f"- It returns {outputs}" + (" as a tuple in that order." if len(g.outputs) > 1 else "."),
        f"- `{reference_file}` holds the reference (`{g.reference}`) "
        f"and the input maker (`{g.inputs}(dims, seed, device)`).",
        "- Your solution will be re-verified after the session by an independent harness on fresh inputs "
        "and on untimed shapes from the domain below.",
        "",
        "## Tolerance",
        f"|out - ref| <= {g.tolerance.atol} + {g.tolerance.rtol} * |ref|, elementwise, against the reference.",
        "",
        "## Timed shapes",
        "| name | dims |",
        "| --- | --- |",
        *_shape_rows(g.shapes),
        "",
        "## Shape domain (the solution must be correct for any of these)",
        *[
            f"- {dim}: {r.min}..{r.max}" + (f", multiple of {r.multiple_of}" if r.multiple_of > 1 else "")
            for dim, r in g.shape_domain.items()
        ],
        "",
        "## Small shapes (for quick checks)",
        "| name | dims |",
        "| --- | --- |",
        *_shape_rows(g.smoke_shapes),
        "",
        "## Baselines to beat",
        *[f"- {name}: {b.description or b.function}" for name, b in g.baselines.items()],
        "",
        "## Hardware",
        f"{g.hardware.name}: {g.hardware.peak_tflops} TFLOP/s peak, {g.hardware.peak_bandwidth_tbps} TB/s HBM.",
        "",
        "## Budget",
        f"{g.budget.wall_clock_minutes} minutes of wall-clock time.",
    ]
    return "\n".join(lines) + "\n"


def instruction(loaded: LoadedGoal) -> str:
    """The goal-only prompt: the goal and nothing else."""
    return render_markdown(loaded)
