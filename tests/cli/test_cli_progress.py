"""The live progress line as a user sees it: in a real pseudo-terminal at 80 and 120 columns.

The child process runs the library's own :class:`ProgressView` (rich detects the terminal
and its width from the pty); the test reads what reached the terminal, strips the control
sequences and checks the last line drawn. Off a terminal the view prints plain lines.
"""

from __future__ import annotations

import io
import os
import re
import select
import struct
import subprocess
import sys
import textwrap

import pytest
from rich.console import Console

from retrybudget import FakeClock
from retrybudget.cli._progress import LiveTally, ProgressView, render_status
from retrybudget.core.actions import RequestInfo
from retrybudget.core.outcome import Wait, WaitReason
from retrybudget.observe import WaitEvent

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")

CHILD = textwrap.dedent("""
    from rich.console import Console
    from retrybudget import FakeClock
    from retrybudget.cli._progress import LiveTally, ProgressView
    from retrybudget.core.actions import RequestInfo
    from retrybudget.core.outcome import Wait, WaitReason
    from retrybudget.observe import WaitEvent

    clock = FakeClock()
    tally = LiveTally(clock)
    console = Console()
    assert console.is_terminal, "the child should see a terminal"
    with ProgressView(console, tally, 120, "lookups", clock) as view:
        for i in range(56):
            tally({"outcome": "failed" if i % 10 == 9 else "ok"})
            clock.sleep(0.1)
            view.tick()
        wait = Wait(3.0, WaitReason.GATE, "coordinator", 1)
        for n in range(4):
            tally.before_wait(WaitEvent(f"op{n}", RequestInfo(), wait))
        view.tick()
    print("width", console.width)
""")
CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def _run_in_pty(columns: int) -> str:
    import fcntl
    import pty
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    env["TERM"] = "xterm-256color"
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdin=slave, stdout=slave, stderr=slave,
                            env=env, close_fds=True)
    os.close(slave)
    chunks: list[bytes] = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 30.0)  # generous: a loaded machine
            if not ready:
                break
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
        proc.wait(timeout=30)
    assert proc.returncode == 0, b"".join(chunks).decode("utf-8", "replace")
    return b"".join(chunks).decode("utf-8", "replace")


def _drawn_lines(output: str) -> list[str]:
    text = CONTROL.sub("", output)
    return [line.rstrip() for line in re.split(r"[\r\n]+", text) if "/120" in line]


@pytest.mark.parametrize("columns", [80, 120])
def test_the_live_line_fits_and_keeps_bar_count_rate_eta_and_gate(columns: int) -> None:
    output = _run_in_pty(columns)
    assert f"width {columns}" in CONTROL.sub("", output)
    lines = _drawn_lines(output)
    assert lines, output
    last = lines[-1]
    assert len(last) <= columns, last
    for part in ("━", "56/120", "/s", "ETA 0:", "gate closed", "4 waiting"):
        assert part in last, last
    if columns >= 120:
        assert "ok 51" in last
        assert "failed 5" in last
    assert all(len(line) <= columns for line in lines)


def test_narrower_terminals_keep_count_and_gate() -> None:
    for width in range(20, 80):
        line = render_status(width, title="lookups", done=56, total=120, elapsed=6.0,
                             gate=("closed", 4, 3.0), counts="ok 51 · rate-limited 0 · failed 5")
        assert len(line) <= width
        assert "56/120" in line
        assert "gate closed" in line
    assert "━" in render_status(50, title="t", done=1, total=2, elapsed=1.0, gate=("open", 0, 0.0),
                                counts="")


def test_plain_lines_when_not_a_terminal() -> None:
    out = io.StringIO()
    console = Console(file=out, width=80)
    clock = FakeClock()
    tally = LiveTally(clock)
    assert not console.is_terminal
    with ProgressView(console, tally, 10, "fetch urls.txt", clock) as view:
        for _ in range(4):
            tally({"outcome": "ok"})
            clock.sleep(1.0)
            view.tick()
        tally.before_wait(WaitEvent("op", RequestInfo(), Wait(5.0, WaitReason.GATE, "coordinator", 1)))
    lines = out.getvalue().splitlines()
    assert lines[0] == "fetch urls.txt: 10 operations"
    assert "\x1b" not in out.getvalue()
    assert "4/10" in lines[-1]
    assert "gate closed" in lines[-1]
    assert "ok 4" in lines[-1]
