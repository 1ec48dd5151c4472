"""query_gpu: what NVML says about the machine's NVIDIA GPUs, or a clear 'no GPU'."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel


class Device(BaseModel):
    index: int
    name: str
    uuid: str
    compute_capability: str
    memory_total_mib: int
    memory_used_mib: int
    memory_free_mib: int
    utilization_gpu_pct: int | None
    utilization_memory_pct: int | None
    sm_clock_mhz: int | None
    sm_clock_max_mhz: int | None
    memory_clock_mhz: int | None
    memory_clock_max_mhz: int | None
    temperature_c: int | None
    power_w: float | None
    power_limit_w: float | None


class GpuReport(BaseModel):
    available: bool
    """False when no NVIDIA GPU or driver is present; `reason` then says why."""
    reason: str | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    devices: list[Device] = []


def nvml_or_none(fn: Callable[[], Any]) -> Any:
    """Some fields are unsupported on some boards or in VMs: None rather than an error."""
    import pynvml

    try:
        return fn()
    except pynvml.NVMLError:
        return None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def query_gpu() -> GpuReport:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:
        return GpuReport(available=False, reason=f"NVML unavailable (no NVIDIA GPU or driver): {exc}")
    try:
        cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
        report = GpuReport(
            available=True,
            driver_version=_text(pynvml.nvmlSystemGetDriverVersion()),
            cuda_driver_version=f"{cuda // 1000}.{cuda % 1000 // 10}",
        )
        for i in range(pynvml.nvmlDeviceGetCount()):
            report.devices.append(_device(pynvml, i))
        if not report.devices:
            return GpuReport(available=False, reason="NVML found no devices", driver_version=report.driver_version)
        return report
    finally:
        pynvml.nvmlShutdown()


def _device(nv, i: int) -> Device:
    h = nv.nvmlDeviceGetHandleByIndex(i)
    mem = nv.nvmlDeviceGetMemoryInfo(h)
    util = nvml_or_none(lambda: nv.nvmlDeviceGetUtilizationRates(h))
    major, minor = nv.nvmlDeviceGetCudaComputeCapability(h)
    mib = 1024 * 1024
    power = nvml_or_none(lambda: nv.nvmlDeviceGetPowerUsage(h))
    limit = nvml_or_none(lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h))
    return Device(
        index=i,
        name=_text(nv.nvmlDeviceGetName(h)),
        uuid=_text(nv.nvmlDeviceGetUUID(h)),
        compute_capability=f"{major}.{minor}",
        memory_total_mib=mem.total // mib,
        memory_used_mib=mem.used // mib,
        memory_free_mib=mem.free // mib,
        utilization_gpu_pct=util.gpu if util else None,
        utilization_memory_pct=util.memory if util else None,
        sm_clock_mhz=nvml_or_none(lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
        sm_clock_max_mhz=nvml_or_none(lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM)),
        memory_clock_mhz=nvml_or_none(lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)),
        memory_clock_max_mhz=nvml_or_none(lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_MEM)),
        temperature_c=nvml_or_none(lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
        power_w=power / 1000 if power is not None else None,
        power_limit_w=limit / 1000 if limit is not None else None,
    )


def shown(value: object, unit: str = "") -> str:
    """A value for people: 'n/a' where NVML reported none (never Python's None)."""
    return "n/a" if value is None else f"{value}{unit}"


def describe(report: GpuReport) -> str:
    """Human-readable form for `jg-mcp gpu`."""
    if not report.available:
        return f"No GPU: {report.reason or 'NVML reports none'}"
    lines = [f"driver {shown(report.driver_version)}, CUDA {shown(report.cuda_driver_version)}"]
    for d in report.devices:
        lines.append(
            f"[{d.index}] {d.name} (sm_{d.compute_capability.replace('.', '')}) "
            f"memory {d.memory_used_mib}/{d.memory_total_mib} MiB used, util {shown(d.utilization_gpu_pct, '%')}, "
            f"SM {shown(d.sm_clock_mhz)}/{shown(d.sm_clock_max_mhz)} MHz, "
            f"mem {shown(d.memory_clock_mhz)}/{shown(d.memory_clock_max_mhz)} MHz, "
            f"{shown(d.temperature_c, ' C')}, {shown(d.power_w, ' W')} of {shown(d.power_limit_w, ' W')}"
        )
    return "\n".join(lines)
