"""Smoke test of benchmarks/llm_pacing.py: a small run of two contenders completes, and what
it reports adds up against what the provider admitted.

Checked on any machine: no window charged past its limits, every call either served or
counted with its reason, the tokens admitted never more than the load. Throughput and wall
figures are not asserted (machines are noisy).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "llm_pacing.py"
sys.path.insert(0, str(ROOT / "benchmarks"))

import llm_pacing  # noqa: E402  # the benchmark's own module, from its folder


def test_the_load_costs_what_it_says() -> None:
    bodies = llm_pacing.bodies(50)
    costs = [llm_pacing.true_cost(body) for body in bodies]
    assert all(100 <= cost <= 4000 for cost in costs)
    assert len(set(costs)) > 40  # mixed costs
    assert llm_pacing.bodies(50) == bodies  # seeded: the same load for every contender
    estimates = [llm_pacing.cost(body) for body in bodies]
    assert all(estimate >= cost for estimate, cost in zip(estimates, costs, strict=True))


@pytest.mark.slow
def test_a_small_run_completes_and_adds_up(tmp_path: Path) -> None:
    out = tmp_path / "llm.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--processes", "2", "--tasks", "5", "--ops", "24",
         "--rpm", "10", "--tpm", "12000", "--window", "1", "--deadline", "40",
         "--only", "aiolimiter", "--only", "retrybudget-memory", "--json", str(out)],
        capture_output=True, text=True, timeout=180, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    results = {r["name"]: r for r in json.loads(out.read_text(encoding="utf-8"))}
    assert set(results) == {"aiolimiter", "retrybudget-memory"}
    total = sum(llm_pacing.true_cost(body) for body in llm_pacing.bodies(24))
    for name, result in results.items():
        assert result["over_limit_windows"] == 0, name
        assert result["ops"] == 24
        assert result["ok"] + sum(result["failures"].values()) == 24, (name, result["failures"])
        assert result["requests"] == result["ok"] + result["rejections"], name  # each a 200 or a 429
        assert result["tokens"] <= total, name
        assert result["wall"] > 0
