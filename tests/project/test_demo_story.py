"""The demo tells its story: another client spends the quota, the gate closes, every worker
waits for the provider's reset and no lookup is throttled twice; the chart shows it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.support.cli import run_cli


def test_another_client_spends_the_quota_and_nothing_is_throttled_twice(tmp_path: Path) -> None:
    args = ["--size", "40", "--workers", "6", "--limit", "10", "--window", "1", "--out", "o"]
    result = run_cli("demo", *args, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "another client of the same account will spend the quota" in result.stdout
    summary = json.loads((tmp_path / "o" / "demo-summary.json").read_text("utf-8"))
    story = summary["story"]
    assert story["other_client_requests"] >= 1
    # The spend shows either as a throttled answer to the job (then the gate closes for every
    # worker) or, when the job's workers were already held or paced, as the other client's own
    # throttled answer; a loaded machine decides which. Never is a lookup throttled twice.
    assert story["operations_throttled"] >= 1 or story["other_client_throttled"] >= 1
    assert story["operations_throttled_twice"] == 0
    if story["operations_throttled"]:
        assert summary["waits"]["gate"]["count"] >= 1
    assert summary["capacity"]["ratio"] is None or summary["capacity"]["ratio"] >= 1.0
    assert summary["provider"]["requests"] == summary["attempts"]  # the job's own requests
    page = (tmp_path / "o" / "demo-requests.html").read_text("utf-8")
    windows = page.count('class="limit"') - 1  # one limit line per window, one in the legend
    assert windows >= 4
    assert page.count('class="throttle"') >= 1  # the job's or the other client's
    assert page.count('class="gate-wait"') == summary["waits"]["gate"]["count"]
    # the other client's served requests are drawn as its own bars (its throttled ones as
    # throttled bars): at least one bar unless every request it made was throttled
    served_elsewhere = story["other_client_requests"] - story["other_client_throttled"]
    assert page.count('class="bar other"') >= 1 or served_elsewhere == 0
    for name in ("demo-urls.txt", "demo-results.jsonl", "demo-audit.jsonl", "demo-state.sqlite",
                 "demo-summary.json", "demo-requests.html"):
        assert (tmp_path / "o" / name).exists(), name


def test_demo_help_names_every_file_it_writes(tmp_path: Path) -> None:
    result = run_cli("demo", "--help")
    assert result.returncode == 0
    written = {p.name for p in (tmp_path / "x").glob("*")}  # nothing: --help writes nothing
    assert written == set()
    for name in ("demo-urls.txt", "demo-results.jsonl", "demo-audit.jsonl", "demo-state.sqlite",
                 "demo-state.sqlite.lock", "demo-summary.json", "demo-requests.html"):
        assert name in result.stdout, name


def test_without_the_other_client_nobody_else_spends_the_quota(tmp_path: Path) -> None:
    args = ["--size", "20", "--workers", "4", "--limit", "10", "--window", "1", "--out", "o",
            "--no-other-client"]
    result = run_cli("demo", *args, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "o" / "demo-summary.json").read_text("utf-8"))
    assert summary["story"]["other_client_requests"] == 0
    assert not re.search("another client spent", result.stdout)
