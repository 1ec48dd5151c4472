"""GPU clocks, power and slowdown reasons while a shape is timed: NVML, sampled from a thread of the harness.

The candidate runs in another process and cannot see or steer this. The samples say at which SM clock the
timed calls ran and whether the power cap or heat held the clock down: the first thing to look at when a
time disagrees with another measurement of the same call.
"""

from __future__ import annotations

import statistics
import threading
from collections.abc import Callable

from jg_mcp.eval.report_timing import ClockSummary
from jg_mcp.gpu import nvml_or_none

Sample = tuple[float | None, float | None, frozenset[str]]
"""SM clock in MHz, board power in W, the names of the slowdown reasons active."""

SLOWDOWNS = {
    "sw_power_cap": "nvmlClocksEventReasonSwPowerCap",
    "hw_slowdown": "nvmlClocksEventReasonHwSlowdown",
    "hw_power_brake": "nvmlClocksEventReasonHwPowerBrakeSlowdown",
    "sw_thermal": "nvmlClocksEventReasonSwThermalSlowdown",
    "hw_thermal": "nvmlClocksEventReasonHwThermalSlowdown",
    "idle": "nvmlClocksEventReasonGpuIdle",
}


class ClockSampler:
    """Calls `read` every `interval_s` on a thread between `with` entry and exit; `summary()` after. Each sample
    is labelled with `owner` as it was when the sample was taken: the timing sets it to the callable whose timed
    block is running, so each callable's own clocks can be told apart from the others' (`summary(owner)`)."""

    def __init__(
        self,
        read: Callable[[], Sample],
        max_mhz: float | None = None,
        limit_w: float | None = None,
        interval_s: float = 0.01,
    ):
        self.read, self.max_mhz, self.limit_w, self.interval_s = read, max_mhz, limit_w, interval_s
        self.samples: list[Sample] = []
        self.owners: list[str | None] = []
        """The owner of each sample, in step with `samples`."""
        self.owner: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="jg-clock-sampler", daemon=True)

    def _run(self) -> None:
        while True:
            owner = self.owner
            try:
                sample = self.read()
            except Exception:  # a board that stops answering ends the sampling, never the eval
                return
            self.owners.append(owner)
            self.samples.append(sample)
            if self._stop.wait(self.interval_s):
                return

    def __enter__(self) -> ClockSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self, owner: str | None = None, since: int = 0) -> ClockSummary | None:
        """Of every sample from the `since`-th on; with `owner`, of that owner's only. None without a clock."""
        n_taken = len(self.samples)  # the thread may append meanwhile: read the two lists up to one length
        samples = [
            s
            for s, who in zip(self.samples[since:n_taken], self.owners[since:n_taken], strict=True)
            if owner is None or who == owner
        ]
        clocks = [s[0] for s in samples if s[0] is not None]
        if not clocks:
            return None
        power = [s[1] for s in samples if s[1] is not None]
        n = len(samples)
        seen = {name for s in samples for name in s[2]}
        return ClockSummary(
            samples=n,
            sm_mhz_median=statistics.median(clocks),
            sm_mhz_min=min(clocks),
            sm_mhz_max=self.max_mhz,
            power_w_median=statistics.median(power) if power else None,
            power_limit_w=self.limit_w,
            slowdowns={name: sum(name in s[2] for s in samples) / n for name in sorted(seen)},
        )


def nvml_sampler(uuid: str, interval_s: float = 0.01) -> ClockSampler | None:
    """A sampler of the GPU with this UUID (as torch reports it), or None where NVML cannot read it."""
    try:
        import pynvml as nv

        nv.nvmlInit()
        h = nv.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}")
        bits = {name: getattr(nv, const) for name, const in SLOWDOWNS.items() if hasattr(nv, const)}
        older = nv.nvmlDeviceGetCurrentClocksThrottleReasons
        reasons_of = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", older)
        max_mhz = nvml_or_none(lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM))
        limit = nvml_or_none(lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h) / 1000)
    except Exception:
        return None

    def read() -> Sample:
        power = nvml_or_none(lambda: nv.nvmlDeviceGetPowerUsage(h) / 1000)
        reasons = nvml_or_none(lambda: reasons_of(h)) or 0
        names = frozenset(name for name, bit in bits.items() if reasons & bit)
        return nvml_or_none(lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)), power, names

    return ClockSampler(read, max_mhz, limit, interval_s)


def device_sampler(device: str) -> ClockSampler | None:
    """A sampler of the current CUDA device when `device` is "cuda" and NVML can read it, else None."""
    if device != "cuda":
        return None
    import torch

    try:
        uuid = str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid)
    except (AssertionError, RuntimeError):  # no CUDA here
        return None
    return nvml_sampler(uuid)
