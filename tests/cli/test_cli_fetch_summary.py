"""The end of a ``fetch`` run: counts that agree, the failed ids with their reasons, an exit
status that says whether anything is left to do, and a word on the first Ctrl-C."""

from __future__ import annotations

import re
import signal
from pathlib import Path

from retrybudget.sandbox import Faults, SandboxConfig, serve_in_thread
from tests.support.cli import count_lines, run_cli, start_cli, wait_for, write_urls


def test_the_first_failures_are_named_and_the_rest_pointed_at(tmp_path: Path) -> None:
    with serve_in_thread(SandboxConfig(rentals=3)) as sandbox:
        urls = [sandbox.url("/rentals/1/availability")] + [
            sandbox.url(f"/rentals/{900 + i}/availability") for i in range(7)]
        path = write_urls(tmp_path / "in.txt", urls)
        result = run_cli("fetch", str(path), "--quiet", "--workers", "2", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    out = result.stdout
    assert "8 operations recorded (not_found 7, ok 1)" in out
    assert "7 failed:" in out
    named = re.findall(r"^  (line-\d+)  not_found  HTTP 404", out, flags=re.MULTILINE)
    assert len(named) == 5
    assert '… and 2 more: the lines with "ok": false in out/in.results.jsonl' in out


def test_a_refused_connection_is_named_with_its_reason(tmp_path: Path) -> None:
    with serve_in_thread() as sandbox:
        port = int(sandbox.base_url.rsplit(":", 1)[1].strip("/"))
    path = write_urls(tmp_path / "in.txt", [f"http://127.0.0.1:{port}/rentals/1/availability"])
    # --max-deferrals 0: the first failure is final (not deferred until the breaker opens)
    result = run_cli("fetch", str(path), "--quiet", "--deadline", "2", "--max-deferrals", "0",
                     cwd=tmp_path)
    assert result.returncode == 1
    assert re.search(r"^  line-1  (exhausted|deadline)  no response \(ConnectError\): ", result.stdout,
                     flags=re.MULTILINE | re.IGNORECASE), result.stdout


def test_the_first_ctrl_c_says_what_happens(tmp_path: Path) -> None:
    config = SandboxConfig(faults=Faults(latency_s=1.5))
    with serve_in_thread(config) as sandbox:
        path = write_urls(tmp_path / "in.txt", [sandbox.url(f"/rentals/{i}/availability")
                                                for i in range(1, 41)])
        proc = start_cli("fetch", str(path), "--workers", "2", cwd=tmp_path)
        try:
            # the state exists once the run has started; a loaded machine may take a while
            wait_for(lambda: sandbox.stats()["count"] >= 1, 30.0, "the first request")
            proc.send_signal(signal.SIGINT)
            stdout, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 130, stderr
    assert "stopping: " in stdout + stderr
    assert "Ctrl-C again to stop at once" in stdout + stderr
    assert "interrupted; run it again to resume" in stderr
    assert count_lines(tmp_path / "out" / "in.results.jsonl") < 40
