"""Smoke test of benchmarks/storm.py: the quick run of retrybudget (memory, threads) completes.

It checks what must hold on any machine: no success the provider never served, and no
operation past its deadline. Wall-clock targets are not asserted (machines are noisy).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STORM = ROOT / "benchmarks" / "storm.py"


@pytest.mark.slow
def test_the_quick_storm_run_completes_with_honest_outcomes(tmp_path: Path) -> None:
    out = tmp_path / "storm.json"
    done = subprocess.run(
        [sys.executable, str(STORM), "--quick", "--contenders", "retrybudget-threads",
         "--json", str(out)],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    document = json.loads(out.read_text(encoding="utf-8"))
    scenarios = {s["name"]: s for s in document["scenarios"]}
    assert set(scenarios) == {"retry-after", "github-403", "503", "outage", "sustained"}
    for name, scenario in scenarios.items():
        [result] = scenario["results"]
        assert result["contender"] == "retrybudget-threads"
        assert result["missing"] == 0, name
        assert result["ops"] == sum(result["outcomes"].values()), name
        assert result["unserved"] == 0, (name, result["outcomes"])
        assert result["past_deadline"] == 0, (name, result["outcomes"])
        assert result["requests"] > 0, name
    assert scenarios["outage"]["results"][0]["ok"] == 0  # nothing succeeds in an outage
    assert scenarios["sustained"]["results"][0]["extra"]["coordinator"]["breaker_opened"] >= 1
