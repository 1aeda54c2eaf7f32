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
