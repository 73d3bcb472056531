"""A self-contained HTML page (inline SVG, no script, no network) of the provider's traffic.

Requests per second, as the provider saw them, stacked by what it answered (served,
throttled by its rate limit, faults), against the provider's limit; seconds with
rejections are marked.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Bucket", "bucket_requests", "render_chart"]

_W, _H = 960, 420
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 24, 48, 72
_COLORS = {"served": "#3a7d44", "throttled": "#d1495b", "faults": "#edae49"}
_LABELS = {"served": "served", "throttled": "throttled (403/429)", "faults": "faults (5xx, reset)"}
_MAX_BARS = 150
_MAX_WINDOWS = 40


@dataclass(frozen=True, slots=True)
class Bucket:
    """Requests that arrived in one interval, by what the provider answered."""

    start: float
    served: int = 0
    throttled: int = 0
    faults: int = 0

    @property
    def total(self) -> int:
        """Every request in the interval."""
        return self.served + self.throttled + self.faults


def _category(status: object) -> str:
    if status in (403, 429):
        return "throttled"
    if status is None or (isinstance(status, int) and status >= 500):
        return "faults"
    return "served"


def bucket_requests(requests: Iterable[Mapping[str, Any]], start: float,
                    width: float) -> list[Bucket]:
    """Count requests (``arrival``, ``status`` as in the sandbox's stats) per ``width`` seconds."""
    counts: dict[int, dict[str, int]] = {}
    for request in requests:
        index = max(0, math.floor((float(request["arrival"]) - start) / width))
        slot = counts.setdefault(index, {"served": 0, "throttled": 0, "faults": 0})
        slot[_category(request.get("status"))] += 1
    last = max(counts, default=-1)
    return [Bucket(start + i * width, **counts.get(i, {})) for i in range(last + 1)]


def _nice_step(span: float, ticks: int) -> float:
    raw = max(span / max(ticks, 1), 1e-9)
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def _window_marks(requests: Sequence[Mapping[str, Any]], start: float,
                  window_s: float) -> list[tuple[float, int]]:
    """Each provider window (aligned to the wall clock): its start, in seconds since ``start``,
    and how many requests it admitted (every answer but a throttled one)."""
    admitted: dict[int, int] = {}
    for request in requests:
        if _category(request.get("status")) != "throttled":
            index = math.floor(float(request["arrival"]) / window_s)
            admitted[index] = admitted.get(index, 0) + 1
    if not admitted:
        return []
    first, last = min(admitted), max(admitted)
    return [(i * window_s - start, admitted.get(i, 0)) for i in range(first, last + 1)]


def _svg(buckets: Sequence[Bucket], width: float, limit: float | None, limit_label: str,
         windows: Sequence[tuple[float, int]] = ()) -> str:
    plot_w, plot_h = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM
    top = max([b.total / width for b in buckets] + [limit or 0.0, 1.0]) * 1.15
    n = max(len(buckets), 1)
    bar_w = plot_w / n

    def y(value: float) -> float:
        return _TOP + plot_h - value / top * plot_h

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_W} {_H}" role="img" '
             f'aria-label="requests per second">']
    step = _nice_step(top, 6)
    tick = 0.0
    while tick <= top:
        parts.append(f'<line x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" '
                     f'class="grid"/><text x="{_LEFT - 8}" y="{y(tick) + 4:.1f}" '
                     f'text-anchor="end">{tick:g}</text>')
        tick += step
    for i, b in enumerate(buckets):
        x = _LEFT + i * bar_w
        base = 0.0
        for name in ("served", "faults", "throttled"):
            value = getattr(b, name) / width
            if value:
                parts.append(f'<rect x="{x + 0.5:.1f}" y="{y(base + value):.1f}" '
                             f'width="{max(bar_w - 1, 0.5):.1f}" height="{y(base) - y(base + value):.1f}" '
                             f'fill="{_COLORS[name]}"><title>{b.start - buckets[0].start:.0f} s: '
                             f'{getattr(b, name)} {_LABELS[name]}</title></rect>')
            base += value
        if b.throttled:
            cx, cy = x + bar_w / 2, y(base) - 6
            parts.append(f'<path d="M{cx - 4:.1f},{cy - 6:.1f} L{cx + 4:.1f},{cy - 6:.1f} '
                         f'L{cx:.1f},{cy:.1f} Z" fill="{_COLORS["throttled"]}"/>')
    if len(windows) <= _MAX_WINDOWS:
        for offset, count in windows:
            x = _LEFT + max(offset, 0.0) / width * bar_w
            parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{_TOP}" y2="{_TOP + plot_h}" '
                         f'class="window"/><text x="{x + 3:.1f}" y="{_TOP + 10}" class="window-label">'
                         f'{count}</text>')
    span = n * width
    xstep = _nice_step(span, 10)
    t = 0.0
    while t <= span:
        x = _LEFT + t / width * bar_w
        parts.append(f'<text x="{x:.1f}" y="{_TOP + plot_h + 18}" text-anchor="middle">{t:g}</text>')
        t += xstep
    parts.append(f'<text x="{_LEFT + plot_w / 2}" y="{_H - 30}" text-anchor="middle">seconds since '
                 f'the job started</text><text x="16" y="{_TOP + plot_h / 2}" text-anchor="middle" '
                 f'transform="rotate(-90 16 {_TOP + plot_h / 2})">requests per second</text>')
    if limit is not None:
        parts.append(f'<line x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{y(limit):.1f}" y2="{y(limit):.1f}" '
                     f'class="limit"/><text x="{_W - _RIGHT}" y="{y(limit) - 6:.1f}" '
                     f'text-anchor="end" class="limit-label">{html.escape(limit_label)}</text>')
    x = _LEFT
    for name in ("served", "faults", "throttled"):
        parts.append(f'<rect x="{x}" y="14" width="12" height="12" fill="{_COLORS[name]}"/>'
                     f'<text x="{x + 18}" y="25">{html.escape(_LABELS[name])}</text>')
        x += 190
    parts.append("</svg>")
    return "".join(parts)


def render_chart(
    requests: Sequence[Mapping[str, Any]],
    *,
    start: float,
    limit: int | None,
    window_s: float | None,
    title: str,
    notes: Sequence[str] = (),
) -> str:
    """The HTML page.

    Args:
        requests: the provider's request log (``arrival`` epoch seconds, ``status``).
        start: the job's start, epoch seconds (time 0 on the chart).
        limit: the provider's limit per window, if it has one.
        window_s: its window in seconds.
        title: the page's title.
        notes: lines of text shown under the chart.
    """
    end = max((float(r["arrival"]) for r in requests), default=start)
    width = float(max(1, math.ceil((end - start) / _MAX_BARS)))
    buckets = bucket_requests(requests, start, width)
    per_second = None if limit is None or not window_s else limit / window_s
    label = "" if per_second is None else (
        f"provider limit: {limit} per {window_s:g} s ({per_second:g} requests/s on average)")
    rejected = sum(b.throttled for b in buckets)
    windows = [] if limit is None or not window_s else _window_marks(requests, start, window_s)
    window_note = "" if not windows else (
        f" Dotted lines mark the provider's {window_s:g} s windows, each labelled with the "
        f"requests it admitted (at most {limit}).")
    items = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><style>"
        "body{font-family:system-ui,sans-serif;margin:2rem;color:#222;max-width:1000px}"
        "svg{width:100%;height:auto;font-size:12px}.grid{stroke:#ddd}"
        ".limit{stroke:#222;stroke-dasharray:6 4;stroke-width:1.5}.limit-label{font-weight:bold}"
        ".window{stroke:#888;stroke-dasharray:1 3}.window-label{fill:#666;font-size:10px}"
        "</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        f"<p>{sum(b.total for b in buckets)} requests reached the provider; {rejected} were "
        f"throttled (marked &#9660;). Each bar is {width:g} s.{html.escape(window_note)}</p>"
        f"{_svg(buckets, width, per_second, label, windows)}<ul>{items}</ul></body></html>\n"
    )
