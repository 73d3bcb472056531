"""A self-contained HTML page (inline SVG, no script, no network) of the provider's traffic.

Each bar is one of the provider's own rate-limit windows (fixed, aligned to the wall clock),
as wide as the window and as tall as the requests that arrived in it, stacked by what the
provider answered: served to the job, served to another client of the same quota, faults,
throttled. The limit is drawn over every window, so a bar above its line is a window the
provider over-admitted; each throttled answer is a ▼ above its window, and each stretch in
which the job's workers waited at the shared gate is a bar in the lane under the axis.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Bucket", "bucket_requests", "render_chart"]

_W, _H = 960, 460
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 24, 56, 110
_COLORS = {"served": "#3a7d44", "other": "#7b6fb0", "faults": "#edae49", "throttled": "#d1495b",
           "gate": "#4a90d9"}
_LABELS = {"served": "served to the job", "other": "another client", "faults": "faults (5xx, reset)",
           "throttled": "throttled (403/429) ▼", "gate": "workers held at the gate"}
_STACK = ("served", "other", "faults", "throttled")
_MAX_BARS = 150


@dataclass(frozen=True, slots=True)
class Bucket:
    """Requests that arrived in one window, by what the provider answered and to whom."""

    start: float
    served: int = 0
    throttled: int = 0
    faults: int = 0
    other: int = 0

    @property
    def total(self) -> int:
        """Every request in the window."""
        return self.served + self.throttled + self.faults + self.other


def _category(request: Mapping[str, Any], other_path: str | None) -> str:
    status = request.get("status")
    if status in (403, 429):
        return "throttled"
    if status is None or (isinstance(status, int) and status >= 500):
        return "faults"
    if other_path is not None and request.get("path") == other_path:
        return "other"
    return "served"


def bucket_requests(requests: Iterable[Mapping[str, Any]], start: float, width: float,
                    *, aligned: bool = False, other_path: str | None = None) -> list[Bucket]:
    """Count requests (``arrival``, ``status``, ``path`` as in the sandbox's stats) per interval.

    Args:
        requests: the provider's request log.
        start: time 0 (epoch seconds).
        width: the interval, seconds.
        aligned: intervals are aligned to multiples of ``width`` on the wall clock (the
            provider's windows) rather than to ``start``.
        other_path: requests to this path are another client's.
    """
    origin = math.floor(start / width) * width if aligned else start
    counts: dict[int, dict[str, int]] = {}
    for request in requests:
        index = max(0, math.floor((float(request["arrival"]) - origin) / width))
        slot = counts.setdefault(index, dict.fromkeys(_STACK, 0))
        slot[_category(request, other_path)] += 1
    last = max(counts, default=-1)
    return [Bucket(origin + i * width, **counts.get(i, {})) for i in range(last + 1)]


def _nice_step(span: float, ticks: int) -> float:
    raw = max(span / max(ticks, 1), 1e-9)
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


@dataclass(frozen=True, slots=True)
class _Plot:
    """The plot's scales: ``span`` seconds from ``first`` (epoch) across, ``top`` requests up."""

    first: float
    span: float
    top: float
    width: float = _W - _LEFT - _RIGHT
    height: float = _H - _TOP - _BOTTOM

    def x(self, t: float) -> float:
        """Where the epoch instant ``t`` is drawn."""
        return _LEFT + (t - self.first) / self.span * self.width

    def y(self, value: float) -> float:
        """Where a count of ``value`` requests is drawn."""
        return _TOP + self.height - value / self.top * self.height


def _svg(buckets: Sequence[Bucket], start: float, width: float, limit: int | None,
         gate_waits: Sequence[tuple[float, float]]) -> str:
    plot = _Plot(first=buckets[0].start if buckets else start,
                 span=max((len(buckets) * width), 1e-9),
                 top=max([b.total for b in buckets] + [limit or 0, 1]) * 1.2)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_W} {_H}" role="img" '
             'aria-label="requests per provider window">']
    parts.extend(_grid(plot))
    for b in buckets:
        parts.extend(_window(plot, b, start, width, limit))
    parts.extend(_gate_lane(plot, gate_waits))
    parts.extend(_time_axis(plot, start))
    parts.extend(_legend(limit))
    parts.append("</svg>")
    return "".join(parts)


def _grid(plot: _Plot) -> list[str]:
    """A line and its count at each step of the requests' axis."""
    parts = []
    step = _nice_step(plot.top, 6)
    tick = 0.0
    while tick <= plot.top:
        y = plot.y(tick)
        parts.append(f'<line x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
                     f'class="grid"/><text x="{_LEFT - 8}" y="{y + 4:.1f}" '
                     f'text-anchor="end">{tick:g}</text>')
        tick += step
    return parts


def _window(plot: _Plot, b: Bucket, start: float, width: float, limit: int | None) -> list[str]:
    """One window's stacked bar, the limit over it and a ▼ per throttled answer."""
    parts = []
    left, right = plot.x(b.start), plot.x(b.start + width)
    base = 0
    for name in _STACK:
        value = getattr(b, name)
        if value:
            parts.append(f'<rect class="bar {name}" x="{left + 0.5:.1f}" y="{plot.y(base + value):.1f}" '
                         f'width="{max(right - left - 1, 0.5):.1f}" '
                         f'height="{plot.y(base) - plot.y(base + value):.1f}" fill="{_COLORS[name]}">'
                         f"<title>window at {b.start - start:.1f} s: {value} "
                         f"{html.escape(_LABELS[name])}</title></rect>")
        base += value
    if limit is not None:
        parts.append(f'<line class="limit" x1="{left:.1f}" x2="{right:.1f}" y1="{plot.y(limit):.1f}" '
                     f'y2="{plot.y(limit):.1f}"/>')
    for n in range(b.throttled):
        cx, cy = (left + right) / 2, plot.y(b.total) - 6 - 9 * n
        parts.append(f'<path class="throttle" d="M{cx - 4:.1f},{cy - 7:.1f} L{cx + 4:.1f},{cy - 7:.1f} '
                     f'L{cx:.1f},{cy:.1f} Z" fill="{_COLORS["throttled"]}"/>')
    return parts


def _gate_lane(plot: _Plot, gate_waits: Sequence[tuple[float, float]]) -> list[str]:
    """The lane under the axis: a bar per stretch the job's workers waited at the gate."""
    lane = _TOP + plot.height + 30
    parts = [f'<text x="{_LEFT - 8}" y="{lane + 9}" text-anchor="end">gate</text>']
    for begin, seconds in gate_waits:
        parts.append(f'<rect class="gate-wait" x="{plot.x(begin):.1f}" y="{lane}" '
                     f'width="{max(seconds / plot.span * plot.width, 1.5):.1f}" height="10" '
                     f'fill="{_COLORS["gate"]}" '
                     f'opacity="0.35"><title>a worker held at the gate for {seconds:.2f} s</title></rect>')
    return parts


def _time_axis(plot: _Plot, start: float) -> list[str]:
    """The seconds since the job started along the bottom, and both axes' titles."""
    parts = []
    xstep = _nice_step(plot.span, 10)
    t = 0.0
    offset = start - plot.first
    while t <= plot.span - offset + 1e-9:
        parts.append(f'<text x="{plot.x(start + t):.1f}" y="{_TOP + plot.height + 18}" '
                     f'text-anchor="middle">{t:g}</text>')
        t += xstep
    parts.append(f'<text x="{_LEFT + plot.width / 2}" y="{_H - 40}" text-anchor="middle">seconds since '
                 f'the job started</text><text x="16" y="{_TOP + plot.height / 2}" text-anchor="middle" '
                 f'transform="rotate(-90 16 {_TOP + plot.height / 2})">requests per window</text>')
    return parts


def _legend(limit: int | None) -> list[str]:
    """What each colour is, and the limit's line when there is one."""
    parts = []
    legend_x = _LEFT
    for name in (*_STACK, "gate"):
        parts.append(f'<rect x="{legend_x}" y="14" width="12" height="12" fill="{_COLORS[name]}"/>'
                     f'<text x="{legend_x + 18}" y="25">{html.escape(_LABELS[name])}</text>')
        legend_x += 170
    if limit is not None:
        parts.append(f'<line class="limit" x1="{_LEFT}" x2="{_LEFT + 24}" y1="40" y2="40"/>'
                     f'<text x="{_LEFT + 30}" y="44">the provider\'s limit in each window</text>')
    return parts


def render_chart(
    requests: Sequence[Mapping[str, Any]],
    *,
    start: float,
    limit: int | None,
    window_s: float | None,
    title: str,
    notes: Sequence[str] = (),
    gate_waits: Sequence[tuple[float, float]] = (),
    other_path: str | None = None,
) -> str:
    """The HTML page.

    Args:
        requests: the provider's request log (``arrival`` epoch seconds, ``status``, ``path``).
        start: the job's start, epoch seconds (time 0 on the chart).
        limit: the provider's limit per window, if it has one.
        window_s: its window in seconds (the bars are its windows); without one, seconds.
        title: the page's title.
        notes: lines of text shown under the chart.
        gate_waits: ``(start epoch seconds, seconds)`` of each wait at the shared gate.
        other_path: the path another client of the same quota requested.
    """
    aligned = bool(window_s)
    width = float(window_s) if window_s else 1.0
    end = max((float(r["arrival"]) for r in requests), default=start)
    if not aligned:
        width = float(max(1, math.ceil((end - start) / _MAX_BARS)))
    buckets = bucket_requests(requests, start, width, aligned=aligned, other_path=other_path)
    throttled = sum(b.throttled for b in buckets)
    over = sum(1 for b in buckets if limit is not None and b.total - b.throttled > limit)
    what = (f"Each bar is one of the provider's {width:g} s windows; the line over it is its limit "
            f"of {limit}." if aligned and limit is not None else f"Each bar is {width:g} s.")
    items = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><style>"
        "body{font-family:system-ui,sans-serif;margin:2rem;color:#222;max-width:1000px}"
        "svg{width:100%;height:auto;font-size:12px}.grid{stroke:#eee}"
        ".limit{stroke:#222;stroke-dasharray:5 3;stroke-width:1.5}"
        "</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        f"<p>{sum(b.total for b in buckets)} requests reached the provider in {len(buckets)} "
        f"windows; {throttled} were throttled (&#9660;), {len(gate_waits)} worker waits at the "
        f"gate, {over} windows admitted more than the limit. {html.escape(what)}"
        + (f" (provider limit: {limit} per {window_s:g} s)" if limit is not None and window_s else "")
        + f"</p>{_svg(buckets, start, width, limit, gate_waits)}<ul>{items}</ul></body></html>\n"
    )
