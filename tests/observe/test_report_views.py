"""The review report as people read it: a short summary by default, a self-contained HTML page
rendered by a real headless Chromium, and a time "x the ideal" that can never be below 1."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

import retrybudget as rb
from retrybudget.cli._summary import Capacity
from retrybudget.integrations.httpx import RetryTransport
from retrybudget.observe import REPORT_KEYS, AuditHook, JsonlAuditSink, load_audit, review_report
from retrybudget.observe._report_html import render_html
from retrybudget.sandbox import serve_in_thread
from tests.support.cli import run_cli

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.fixture(scope="module")
def audit_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An audit file of real operations: retried, throttled, missing and plain ok lookups."""
    path = tmp_path_factory.mktemp("report") / "audit.jsonl"
    policy = rb.background(backoff=rb.Backoff(base=0.01, cap=0.02))
    retrier = rb.Retrier(policy=policy, hooks=(AuditHook(JsonlAuditSink(path), policy=policy),))
    with serve_in_thread() as sandbox, httpx.Client(transport=RetryTransport(retrier=retrier)) as client:
        scripts = {
            "retried": [{"status": 503}, {"status": 200, "body": {}}],
            "throttled": [{"status": 429, "headers": {"Retry-After": "1"}}, {"status": 200, "body": {}}],
            "missing": [{"status": 404}],
        }
        for name, script in scripts.items():
            job = "<b>missing</b>" if name == "missing" else name  # markup must come out escaped
            client.get(sandbox.load_fixture("report", name, script),
                       extensions={"retrybudget.job_id": job})
        for i in range(1, 4):
            client.get(sandbox.url(f"/rentals/{i}/availability"), extensions={"retrybudget.job_id": f"r{i}"})
    return path


def test_report_prints_a_short_summary_by_default(audit_file: Path) -> None:
    result = run_cli("report", str(audit_file))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert len(out.splitlines()) < 40
    assert f"{audit_file}: 6 operations, 8 attempts (2 beyond the first), 1 throttled answers" in out
    assert re.search(r"^  ok +5 +83%$", out, flags=re.MULTILINE)
    assert re.search(r"^  not_found +1 ", out, flags=re.MULTILINE)
    assert re.search(r"^  retry_after +1 +1\.0 +retry-after$", out, flags=re.MULTILINE)
    assert re.search(r"^  Retry-After obeyed +pass +1 operation", out, flags=re.MULTILINE)
    assert "report" in out.splitlines()[-1]
    assert "--json" in out.splitlines()[-1]


def test_report_json_is_the_whole_document(audit_file: Path) -> None:
    result = run_cli("report", str(audit_file), "--json")
    assert result.returncode == 0, result.stderr
    assert tuple(json.loads(result.stdout)) == REPORT_KEYS


def test_the_html_report_is_self_contained_and_escaped(audit_file: Path) -> None:
    log = load_audit(audit_file)
    page = render_html(log.records, review_report(log), title="Review")
    assert page.startswith("<!DOCTYPE html>")
    assert "<script" not in page
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", page)
    assert "<b>missing</b>" not in page
    assert "&lt;b&gt;missing&lt;/b&gt;" in page
    assert page.count('class="attempt"') == 8
    assert page.count('<tr class="op">') == 6


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (CI installs it: .ci/run)")
def test_the_html_report_renders_in_a_headless_browser(audit_file: Path, tmp_path: Path) -> None:
    page = tmp_path / "review.html"
    result = run_cli("report", str(audit_file), "--html", str(page))
    assert result.returncode == 0, result.stderr
    assert CHROMIUM is not None
    browser = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,900"]
    dom = subprocess.run([*browser, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120, check=False)  # generous: a browser on a loaded machine
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count('class="attempt"') == 8
    assert dom.stdout.count('class="op"') == 6
    assert "Timeline" in dom.stdout
    shot = tmp_path / "review.png"
    subprocess.run([*browser, f"--screenshot={shot}", page.as_uri()], capture_output=True,
                   timeout=120, check=False)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 10_000  # a rendered page, not a blank one


@given(limit=st.integers(1, 50), window=st.integers(1, 10), started=st.floats(0, 10_000),
       operations=st.integers(0, 500), per_window=st.lists(st.integers(0, 50), min_size=1, max_size=60))
def test_no_client_beats_the_ideal(limit: int, window: int, started: float, operations: int,
                                   per_window: list[int]) -> None:
    """Any schedule the provider's windows admit takes at least the ideal: actual ÷ ideal >= 1."""
    capacity = Capacity(limit, float(window), started)
    offset = started % window
    sent, finish = 0, 0.0
    for k, asked in enumerate(per_window * (operations + 1)):
        if sent >= operations:
            break
        count = min(asked, limit)
        if count:
            finish = 0.0 if k == 0 else k * window - offset  # the earliest moment window k opens
            sent += count
    if sent >= operations:
        assert finish >= capacity.ideal_seconds(operations) - 1e-9
    greedy = [0.0 if k == 0 else k * window - offset for k in range(capacity.windows(operations))]
    assert (greedy[-1] if greedy else 0.0) == pytest.approx(capacity.ideal_seconds(operations))
