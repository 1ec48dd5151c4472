"""How pytest-xdist splits the suite between its workers (pyproject.toml's addopts: `-n 2 --dist loadfile`).

Whole files go to a worker, in collection order (the long campaign and eval files first), so that a module-scoped
fixture (an HTTP server, a batch of evals started at once) runs once. Two units are more than a file: the files
that read the demo run (tests.support.demo, one run per process), so that the demo runs once; and the tests whose
evals time on the CPU with host clocks, started last, when no other worker has a test left (the idle workers are
stopped then), so that nothing else of the suite runs while they measure.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

DEMO_READERS = frozenset(
    {
        "tests/review/test_audit.py",
        "tests/commands/test_demo.py",
        "tests/review/test_replay.py",
        "tests/review/test_report_html.py",
        "tests/test_readme.py",
    }
)
TIMED_ON_THE_CPU = (
    "tests/eval/test_hacks_timed.py::test_timing_hack_is_caught_by_the_harness_from_outside",
    "tests/eval/test_hacks_timed.py::test_times_the_candidate_forges_gain_it_nothing",
    "tests/eval/test_timing.py::test_an_honest_candidate_timed_on_the_cpu_is_accepted_with_every_measurement",
    "tests/eval/test_freeze.py::test_no_candidate_process_runs_while_a_baseline_is_timed",
    "tests/eval/test_timing.py::test_a_timing_finding_that_a_second_timing_does_not_show_is_not_reported",
    "tests/eval/test_isolation.py::test_the_correctness_process_is_gone_before_the_baselines_are_timed",
    "tests/eval/test_timing.py::test_every_timed_call_reads_inputs_none_has_seen",
    "tests/eval/test_timing.py::test_a_timed_call_runs_with_the_previous_calls_output_freed_as_under_do_bench",
    "tests/eval/test_spares.py::test_evals_in_a_row_take_the_processes_started_ahead_and_reach_the_same_verdicts",
    "tests/eval/test_graphs.py::test_an_honest_candidate_is_timed_under_graphs_and_its_speedups_are_the_graphs",
    "tests/eval/test_graphs.py::test_a_candidate_that_answers_graph_calls_from_a_cache_is_rejected",
    "tests/eval/test_graphs.py::test_a_callable_that_cannot_run_under_the_graph_leaves_the_shape_timed_per_call",
)
"""Node id prefixes of the tests whose assertions rest on the CPU stand-in's times (checked against the collection: a
renamed one fails); a test that times on the CPU but asserts nothing of the times runs with the others."""
DEMO, ALONE = "the demo's readers", "timed on the cpu, alone"


def unit_of(nodeid: str) -> str:
    """The work unit a test belongs to: its file, or one of the two shared units."""
    if nodeid.startswith(TIMED_ON_THE_CPU):
        return ALONE
    path = nodeid.split("::", 1)[0]
    return DEMO if path in DEMO_READERS else path


def check_names(nodeids: Iterable[str]) -> None:
    """Every TIMED_ON_THE_CPU prefix whose file was collected names a collected test."""
    nodeids = list(nodeids)
    for prefix in TIMED_ON_THE_CPU:
        path = prefix.split("::", 1)[0]
        if any(n.startswith(path + "::") for n in nodeids) and not any(n.startswith(prefix) for n in nodeids):
            raise pytest.UsageError(f"tests/scheduling.py: TIMED_ON_THE_CPU names no test: {prefix}")


def make_scheduler(config, log):
    from xdist.scheduler import LoadFileScheduling

    class Plan(LoadFileScheduling):
        """LoadFileScheduling by unit_of, the ALONE unit last: when it is all that is left, the first worker to ask
        for work keeps it, the others are stopped as they ask, and it starts once they have finished (a worker
        runs its last test only when it gets more work or is stopped, so "no test left" means "stopped")."""

        runner = None

        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

        def _assign_work_unit(self, node) -> None:
            if node not in self.registered_collections:
                return  # a worker started in place of a crashed one, not ready yet: asked again when it is
            if ALONE in self.workqueue and len(self.workqueue) > 1:
                self.workqueue.move_to_end(ALONE)
            elif ALONE in self.workqueue:
                self.runner = self.runner or node
                if node is not self.runner:
                    if not node.shutting_down:
                        node.shutdown()
                    return
                if len(self.assigned_work) > 1:
                    return
            super()._assign_work_unit(node)

        def remove_node(self, node):
            crashed = super().remove_node(node)  # a crashed worker's tests go back to the queue
            if node is self.runner:
                self.runner = None
            if ALONE in self.workqueue and self.runner is not None and list(self.assigned_work) == [self.runner]:
                self._assign_work_unit(self.runner)
            return crashed

    return Plan(config, log)
