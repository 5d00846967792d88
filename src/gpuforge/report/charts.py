"""The report's three charts, built from ReportData (shared by the HTML page; ids are stable)."""

from __future__ import annotations

from gpuforge.report import svg
from gpuforge.report.model import NCCL_MODES, ReportData

NCCL_CHART_ID = "chart-nccl-busbw"
RESNET_CHART_ID = "chart-resnet50-scaling"
IB_CHART_ID = "chart-ib-write-bw"
_MODE_ORDER = [*NCCL_MODES, "unknown"]


def nccl_chart(data: ReportData) -> str:
    ordered = sorted(data.nccl or [], key=lambda s: _MODE_ORDER.index(s.mode) if s.mode in _MODE_ORDER else 99)
    series = [
        svg.Series(item.label, item.points, css_class=f"series mode-{item.mode} {item.collective}") for item in ordered
    ]
    return svg.line_chart(
        NCCL_CHART_ID,
        "NCCL bus bandwidth vs message size",
        series,
        svg.Axis("message size (bytes, log scale)", log=True, tick_format=svg.human_bytes),
        svg.Axis("bus bandwidth (GB/s)"),
    )


def ideal_scaling(points: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """Linear scaling from the smallest measured GPU count's per-GPU throughput."""
    if not points:
        return []
    base_gpus, base_rate = min(points)
    per_gpu = base_rate / base_gpus
    return [(gpus, round(per_gpu * gpus, 2)) for gpus, _ in sorted(points)]


def resnet_chart(data: ReportData) -> str:
    measured = sorted((point.gpus, point.images_per_sec) for point in data.resnet50 or [])
    series = [
        svg.Series("measured", measured, css_class="series measured"),
        svg.Series("ideal scaling", ideal_scaling(measured), dashed=True, markers=False, css_class="series ideal"),
    ]
    return svg.line_chart(
        RESNET_CHART_ID,
        "ResNet-50 training throughput vs GPU count",
        series,
        svg.Axis("GPUs", tick_format=lambda value: f"{value:g}"),
        svg.Axis("images/sec"),
    )


def ib_chart(data: ReportData) -> str:
    bars = [(f"{item.host} {item.hca}", item.bw_gbps, item.line_rate_gbps) for item in data.ib_write_bw or []]
    return svg.bar_chart(IB_CHART_ID, "ib_write_bw per HCA vs line rate", bars, "Gb/s")
