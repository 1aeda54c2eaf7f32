"""Small charts drawn on the server as SVG (no script, no library): a line over days and bars."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Line:
    """A line chart's geometry: ``points`` for an SVG polyline, and its axis labels."""

    points: str
    dots: list[tuple[float, float, str]]  # x, y, the value as text (a tooltip)
    first: str
    last: str
    top: str
    width: int
    height: int


def line(
    series: list[tuple[str, float]], *, top: float | None = None, width: int = 560, height: int = 160
) -> Line | None:
    """``series`` of (label, value), oldest first, scaled to ``top`` (default: its largest value)."""
    if not series:
        return None
    high = top if top is not None else max(v for _, v in series) or 1.0
    pad = 24
    step = (width - 2 * pad) / max(1, len(series) - 1)
    dots = []
    for i, (label, value) in enumerate(series):
        x = pad + i * step
        y = height - pad - (height - 2 * pad) * (value / high if high else 0)
        dots.append((round(x, 1), round(y, 1), f"{label}: {value:g}"))
    return Line(" ".join(f"{x},{y}" for x, y, _ in dots), dots, series[0][0], series[-1][0], f"{high:g}", width, height)


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    width: float  # in percent of the largest


def bars(values: dict[str, float]) -> list[Bar]:
    high = max((abs(v) for v in values.values()), default=0.0) or 1.0
    return [Bar(k, v, round(100 * abs(v) / high, 1)) for k, v in values.items()]


@dataclass(frozen=True)
class Columns:
    """A column chart's geometry: one column per value (x, y, width, height, its tooltip), the axis labels."""

    columns: list[tuple[float, float, float, float, str]]
    first: str
    last: str
    top: str
    total: float
    width: int
    height: int


def columns(series: list[tuple[str, float]], *, width: int = 280, height: int = 120) -> Columns:
    """``series`` of (label, value), oldest first, as columns scaled to its largest value (an empty
    series, or one of zeros, draws no column but keeps its axis)."""
    high = max((v for _, v in series), default=0.0) or 1.0
    pad, left = 20, 28
    slot = (width - left - 4) / max(1, len(series))
    out = []
    for i, (label, value) in enumerate(series):
        h = (height - 2 * pad) * (value / high)
        out.append(
            (
                round(left + i * slot + slot * 0.1, 1),
                round(height - pad - h, 1),
                round(slot * 0.8, 1),
                round(h, 1),
                f"{label}: {value:g}",
            )
        )
    first, last = (series[0][0], series[-1][0]) if series else ("", "")
    top = max((v for _, v in series), default=0.0)
    return Columns(out, first, last, f"{top:g}", sum(v for _, v in series), width, height)
