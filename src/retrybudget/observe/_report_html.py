"""The review report as one self-contained HTML page: a timeline and a table per operation.

No script, no external file: the styles are inline and the timeline is an inline SVG in
which each operation is a row, each attempt a block coloured by its classification and each
wait a lighter block labelled with its reason. Every string comes from audit records, which
are redacted when written, and is escaped here.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from typing import Any

from ._report_text import review_summary

__all__ = ["render_html"]

_ROWS_SHOWN = 400
_ROW_H = 14
_LEFT = 110
_WIDTH = 1000
_COLOURS = {"ok": "#2e7d32", "transient": "#ef6c00", "rate_limited": "#c62828",
            "rejected": "#6a1b9a", "not_found": "#546e7a", "unexpected": "#ad1457",
            "invalid_payload": "#4e342e"}
_WAIT_COLOURS = {"gate": "#90caf9", "pacing": "#b3e5fc", "concurrency": "#e1f5fe"}
_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
pre { background: #f6f8fa; padding: 12px; white-space: pre-wrap; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border-bottom: 1px solid #ddd; padding: 3px 8px; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.legend span { display: inline-block; margin-right: 14px; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: -2px; }
svg text { font: 11px system-ui, sans-serif; fill: #333; }
"""


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _spans(record: Mapping[str, Any]) -> tuple[list[tuple[float, float, str, str]], float]:
    """(start, end, kind, label) per attempt and wait, in seconds since the operation started."""
    out: list[tuple[float, float, str, str]] = []
    history = list(record.get("history") or ())
    ends = {0: 0.0}
    for attempt in history:
        start = float(attempt.get("started") or 0.0)
        end = start + float(attempt.get("elapsed") or 0.0)
        ends[int(attempt.get("number") or 0)] = end
        label = f"attempt {attempt.get('number')}: {attempt.get('status') or attempt.get('error')}"
        out.append((start, end, f"a:{attempt.get('classification')}", label))
    cursor: dict[int, float] = {}
    for wait in record.get("waits") or ():
        after = int(wait.get("after_attempt") or 0)
        start = cursor.get(after, ends.get(after, 0.0))
        end = start + float(wait.get("seconds") or 0.0)
        cursor[after] = end
        seconds = float(wait.get("seconds") or 0.0)
        out.append((start, end, f"w:{wait.get('reason')}",
                    f"wait {seconds:.2f} s: {wait.get('reason')} ({wait.get('source')})"))
    return out, float(record.get("elapsed") or 0.0)


def _timeline(records: list[Mapping[str, Any]]) -> str:
    shown = sorted(records, key=lambda r: float(r.get("started_at") or 0.0))[:_ROWS_SHOWN]
    if not shown:
        return "<p>No operations.</p>"
    origin = min(float(r.get("started_at") or 0.0) for r in shown)
    rows = []
    horizon = 0.0
    for r in shown:
        spans, elapsed = _spans(r)
        offset = float(r.get("started_at") or origin) - origin
        horizon = max(horizon, offset + elapsed, *(offset + end for _, end, _, _ in spans))
        rows.append((r, offset, spans))
    scale = (_WIDTH - _LEFT - 10) / (horizon or 1.0)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" '
             f'height="{len(rows) * _ROW_H + 30}" role="img" aria-label="timeline">']
    for tick in range(int(horizon) + 2):
        x = _LEFT + tick * scale
        if x > _WIDTH:
            break
        parts.append(f'<line x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{len(rows) * _ROW_H}" '
                     'stroke="#eee"/>')
        parts.append(f'<text x="{x:.1f}" y="{len(rows) * _ROW_H + 14}">{tick}s</text>')
    for i, (record, offset, spans) in enumerate(rows):
        y = i * _ROW_H
        parts.append(f'<text x="0" y="{y + 10}">{_e(record.get("job_id") or record.get("operation_id"))}'
                     "</text>")
        for start, end, kind, label in spans:
            x = _LEFT + (offset + start) * scale
            w = max(1.0, (end - start) * scale)
            if kind.startswith("a:"):
                colour = _COLOURS.get(kind[2:], "#757575")
                parts.append(f'<rect class="attempt" x="{x:.1f}" y="{y + 2}" width="{w:.1f}" '
                             f'height="{_ROW_H - 4}" fill="{colour}"><title>{_e(label)}</title></rect>')
            else:
                colour = _WAIT_COLOURS.get(kind[2:], "#ffe082")
                parts.append(f'<rect class="wait" x="{x:.1f}" y="{y + 4}" width="{w:.1f}" '
                             f'height="{_ROW_H - 8}" fill="{colour}"><title>{_e(label)}</title></rect>')
    parts.append("</svg>")
    note = (f"<p>The first {_ROWS_SHOWN} of {len(records)} operations.</p>"
            if len(records) > _ROWS_SHOWN else "")
    legend = "".join(f'<span><i style="background:{c}"></i>attempt: {_e(k)}</span>'
                     for k, c in _COLOURS.items())
    legend += "".join(f'<span><i style="background:{c}"></i>wait: {_e(k)}</span>'
                      for k, c in _WAIT_COLOURS.items())
    legend += '<span><i style="background:#ffe082"></i>wait: backoff, retry-after, reset</span>'
    return f'<div class="legend">{legend}</div>{note}{"".join(parts)}'


def _operations(records: list[Mapping[str, Any]]) -> str:
    head = ("<tr><th>job</th><th>operation</th><th>outcome</th><th>attempts</th>"
            "<th>statuses</th><th>waits (s)</th><th>elapsed (s)</th><th>detail</th></tr>")
    rows = []
    for r in records:
        statuses = " ".join(str(a.get("status") or a.get("error") or "-") for a in r.get("history") or ())
        waited = sum(float(w.get("seconds") or 0.0) for w in r.get("waits") or ())
        rows.append(f'<tr class="op"><td>{_e(r.get("job_id"))}</td><td>{_e(r.get("operation_id"))}</td>'
                    f'<td>{_e(r.get("outcome"))}</td><td class="n">{_e(r.get("attempts"))}</td>'
                    f"<td>{_e(statuses)}</td><td class=\"n\">{waited:.2f}</td>"
                    f'<td class="n">{float(r.get("elapsed") or 0.0):.2f}</td>'
                    f'<td>{_e(r.get("detail"))}</td></tr>')
    return f"<table>{head}{''.join(rows)}</table>"


def render_html(records: Iterable[Mapping[str, Any]], report: Mapping[str, Any], *, title: str) -> str:
    """The whole page: the summary, the timeline and the per-operation table."""
    recs = list(records)
    summary = review_summary(recs, report, title)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>"
            f"<h1>{_e(title)}</h1><h2>Summary</h2><pre>{_e(summary)}</pre>"
            f"<h2>Timeline</h2>{_timeline(recs)}"
            f"<h2>Operations ({len(recs)})</h2>{_operations(recs)}</body></html>\n")
