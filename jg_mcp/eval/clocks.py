"""GPU clocks, power and slowdown reasons while a shape is timed: NVML, sampled from a thread of the harness.

The candidate runs in another process and cannot see or steer this. The samples say at which SM clock the
timed calls ran and whether the power cap or heat held the clock down: the first thing to look at when a
time disagrees with another measurement of the same call.
"""

from __future__ import annotations

import statistics
import threading
from collections.abc import Callable

from jg_mcp.eval.report import ClockSummary
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
    """Calls `read` every `interval_s` on a thread between `with` entry and exit; `summary()` after."""

    def __init__(
        self,
        read: Callable[[], Sample],
        max_mhz: float | None = None,
        limit_w: float | None = None,
        interval_s: float = 0.01,
    ):
        self.read, self.max_mhz, self.limit_w, self.interval_s = read, max_mhz, limit_w, interval_s
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="jg-clock-sampler", daemon=True)

    def _run(self) -> None:
        while True:
            try:
                self.samples.append(self.read())
            except Exception:  # a board that stops answering ends the sampling, never the eval
                return
            if self._stop.wait(self.interval_s):
                return

    def __enter__(self) -> ClockSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> ClockSummary | None:
        clocks = [s[0] for s in self.samples if s[0] is not None]
        if not clocks:
            return None
        power = [s[1] for s in self.samples if s[1] is not None]
        n = len(self.samples)
        seen = {name for s in self.samples for name in s[2]}
        return ClockSummary(
            samples=n,
            sm_mhz_median=statistics.median(clocks),
            sm_mhz_min=min(clocks),
            sm_mhz_max=self.max_mhz,
            power_w_median=statistics.median(power) if power else None,
            power_limit_w=self.limit_w,
            slowdowns={name: sum(name in s[2] for s in self.samples) / n for name in sorted(seen)},
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
