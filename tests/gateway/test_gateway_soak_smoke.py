"""A shortened gateway soak (benchmarks/gateway_soak.py): 20 clients for 8 s against the
hostile provider (valid 200s, invalid payloads, short 429s, 5xx, 404s, slow heads, trickled
bodies, resets and hangs), with the full soak's checks.

It asserts what must hold on any machine: every answer inside the contract, no
``provider_rate_limited`` answer more than one rate window after the provider's last 429,
open descriptors flat, the store, breaker and gate consistent afterwards, every answer
counted once. Speed is not asserted; the latency bounds are the deadline plus a generous
slack (real clock, three processes on a shared machine). The full run (100 clients, 45 s)
is a benchmark: ``python benchmarks/gateway_soak.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOAK = ROOT / "benchmarks" / "gateway_soak.py"
DEADLINE = 2.0
MARGIN = 0.25
"""The full soak's own target: p99 within the deadline + 0.25 s."""
P99_SLACK = 0.75
"""Seconds past that target the 99th percentile may take here: a CI machine with two cores
shared by the provider, the gateway, 20 clients and other work starves processes for
hundreds of milliseconds at a time."""
MAX_SLACK = 2.0
"""Seconds past the deadline any answer may take here (generous on purpose, as above)."""


@pytest.mark.slow
def test_a_short_soak_keeps_the_contract_and_the_deadline(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    done = subprocess.run(
        [sys.executable, str(SOAK), "--clients", "20", "--seconds", "8", "--json", str(out)],
        capture_output=True, text=True, timeout=180, cwd=ROOT / "benchmarks", check=False,
    )
    assert out.exists(), done.stderr[-2000:]
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["answers"] > 0
    behaviours = result["provider_behaviours"]
    assert set(behaviours) == {"ok", "invalid", "rate_limited", "5xx", "not_found", "slow_head",
                               "trickle", "reset", "hang"}, behaviours  # the whole mix ran
    assert result["violations"] == 0, result["violation_kinds"]
    assert result["no_answer"] == 0
    assert result["p99_ms"] <= (DEADLINE + MARGIN + P99_SLACK) * 1000
    assert result["max_ms"] <= (DEADLINE + MAX_SLACK) * 1000
    # "none": the door's overload answer (its shape is checked per answer as a violation)
    assert set(result["outcomes"]) <= {"ok", "deadline", "exhausted", "rate_limited",
                                       "circuit_open", "retry_budget", "not_retried", "none",
                                       "invalid_payload", "not_found", "unexpected"}
    assert result["outcomes"].get("none", 0) == result["shed"]
    assert set(result["shed_reasons"]) <= {"capacity", "budget", "connections"}
    checks = result["checks"]
    assert checks["no answer outside the contract"]
    assert checks["no provider_rate_limited answer more than one window after the provider's "
                  "last 429"], (result["rate_limited_after_last_429_plus_window"],
                                result["rate_limited_details"])
    assert checks["open descriptors flat (< 10 % over the calm part)"], (
        result["fds_half"], result["fds_end"])
    assert checks["breaker and gate let lookups through after the load"]
    assert checks["health ok"]
    assert checks["store intact, only confirmed facts"], result["store"]
    assert checks["every answer counted once by the gateway"]
