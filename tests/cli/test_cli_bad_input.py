"""Every command's bad input, as a user meets it: one line on stderr, exit status 2, nothing written.

Each row runs the real command as a subprocess in a directory holding a few prepared files
(a good URL list, a file that is not a database, a malformed policy…). The line must start
with ``retrybudget COMMAND:``, name the option (or file) at fault and the problem in plain
words, show no traceback and no Python internals, and the directory must be exactly as it
was: no file created, changed or half-written.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

PYTHON_WORDING = ("Traceback", "invalid literal", "KeyError", "File exists", "Errno", "object has no",
                  "NoneType", "could not convert")


@dataclass(frozen=True)
class Row:
    """One bad input: the arguments and the words the one-line message must hold."""

    id: str
    argv: tuple[str, ...]
    words: tuple[str, ...]


ROWS = [
    # demo
    Row("demo-out-is-a-file", ("demo", "--out", "urls.txt"), ("--out", "urls.txt", "not a directory")),
    Row("demo-out-under-a-file", ("demo", "--out", "urls.txt/sub"), ("--out", "not a directory")),
    Row("demo-out-symlink-loop", ("demo", "--out", "loop"), ("--out", "loop", "symlink loop")),
    Row("demo-style-unknown", ("demo", "--style", "loud"), ("--style", "loud", "github")),
    Row("demo-size-zero", ("demo", "--size", "0"), ("--size", "at least 1")),
    Row("demo-fault-share", ("demo", "--fault-5xx", "2"), ("--fault-5xx", "between 0 and 1")),
    # fetch
    Row("fetch-input-missing", ("fetch", "missing.txt"), ("missing.txt", "no such file")),
    Row("fetch-input-binary", ("fetch", "binary.bin"), ("binary.bin", "not UTF-8")),
    Row("fetch-input-bad-url", ("fetch", "bad-urls.txt"), ("bad-urls.txt:1", "bad URL")),
    Row("fetch-state-not-a-database", ("fetch", "urls.txt", "--state", "notdb.sqlite"),
        ("--state", "notdb.sqlite", "not a retrybudget state file")),
    Row("fetch-state-under-a-file", ("fetch", "urls.txt", "--state", "urls.txt/x.sqlite"),
        ("--state", "not a directory")),
    Row("fetch-out-under-a-file", ("fetch", "urls.txt", "--out", "urls.txt/r.jsonl"),
        ("--out", "not a directory")),
    Row("fetch-state-symlink-loop", ("fetch", "urls.txt", "--state", "loop"),
        ("--state", "loop", "symlink loop")),
    Row("fetch-state-under-a-symlink-loop", ("fetch", "urls.txt", "--state", "loop/x.sqlite"),
        ("--state", "loop", "symlink loop")),
    Row("fetch-audit-symlink-loop", ("fetch", "urls.txt", "--audit", "loop"),
        ("--audit", "loop", "symlink loop")),
    Row("fetch-out-symlink-loop", ("fetch", "urls.txt", "--out", "loop"), ("--out", "loop", "symlink loop")),
    Row("fetch-audit-unwritable", ("fetch", "urls.txt", "--audit", "unwritable.jsonl"),
        ("--audit", "unwritable.jsonl", "cannot write")),
    Row("fetch-state-foreign-database", ("fetch", "urls.txt", "--state", "other-app.sqlite"),
        ("--state", "other-app.sqlite", "not a retrybudget state file", "notes", "unchanged")),
    Row("fetch-state-a-gateway-database", ("fetch", "urls.txt", "--state", "gateway.sqlite"),
        ("--state", "gateway.sqlite", "not a retrybudget state file", "rentals")),
    Row("fetch-input-symlink-loop", ("fetch", "loop"), ("loop", "symlink loop")),
    Row("fetch-policy-symlink-loop", ("fetch", "urls.txt", "--policy", "loop"),
        ("--policy", "loop", "symlink loop")),
    Row("fetch-job-file-symlink-loop", ("fetch", "urls.txt", "--job-file", "loop"),
        ("loop", "symlink loop")),
    Row("fetch-workers-word", ("fetch", "urls.txt", "--workers", "many"), ("--workers", "'many'")),
    Row("fetch-profile-unknown", ("fetch", "urls.txt", "--profile", "acme"), ("--profile", "acme", "github")),
    Row("fetch-policy-malformed", ("fetch", "urls.txt", "--policy", "bad.toml"), ("bad.toml", "TOML")),
    Row("fetch-policy-unknown", ("fetch", "urls.txt", "--policy", "lazy"), ("--policy", "lazy")),
    Row("fetch-policy-binary", ("fetch", "urls.txt", "--policy", "binary.bin"),
        ("--policy", "binary.bin", "not UTF-8")),
    Row("fetch-job-file-malformed", ("fetch", "urls.txt", "--job-file", "bad.toml"),
        ("--job-file", "bad.toml", "invalid TOML")),
    Row("fetch-header-unset-env", ("fetch", "urls.txt", "--header", "Authorization: env:RB_UNSET_VAR"),
        ("--header", "RB_UNSET_VAR", "not set")),
    Row("fetch-redis-bad-url", ("fetch", "urls.txt", "--redis", "mysql://x"), ("--redis", "Redis URL")),
    # queue
    Row("queue-state-missing", ("queue", "status", "missing.sqlite"), ("missing.sqlite", "no such file")),
    Row("queue-state-not-a-database", ("queue", "status", "notdb.sqlite"),
        ("notdb.sqlite", "not a queue")),
    Row("queue-foreign-database", ("queue", "status", "other-app.sqlite"),
        ("other-app.sqlite", "not a queue")),
    Row("queue-symlink-loop", ("queue", "status", "loop"), ("loop",)),
    # review
    Row("review-audit-missing", ("review", "decide", "missing.jsonl", "op1", "--decision", "accept",
                                 "--reviewer", "ana"), ("missing.jsonl", "no such file")),
    # check
    Row("check-fixtures-missing", ("check", "--fixtures", "missing.json"), ("missing.json", "no such file")),
    Row("check-fixtures-not-json", ("check", "--fixtures", "notdb.sqlite"), ("notdb.sqlite", "JSON")),
    Row("check-fixtures-no-cases", ("check", "--fixtures", "no-cases.json"), ("no-cases.json", '"cases"')),
    Row("check-fixtures-bad-number", ("check", "--fixtures", "bad-number.json"),
        ("bad-number.json", "case A01", "max_attempts", '"three"')),
    Row("check-policy-missing", ("check", "--policy", "missing.toml"), ("missing.toml", "no such file")),
    Row("check-profile-binary", ("check", "--profile", "binary.bin"), ("binary.bin", "not UTF-8")),
    Row("check-only-unknown", ("check", "--only", "Z99"), ("--only", "Z99")),
    # report
    Row("report-missing", ("report", "missing.jsonl"), ("missing.jsonl", "no such file")),
    Row("report-empty", ("report", "empty.jsonl"), ("empty.jsonl", "empty")),
    Row("report-not-json", ("report", "notdb.sqlite"), ("notdb.sqlite", "line 1", "JSON")),
    Row("report-directory", ("report", "."), (".", "directory")),
    Row("report-symlink-loop", ("report", "loop"), ("loop", "symlink loop")),
    Row("report-html-symlink-loop", ("report", "notdb.sqlite", "--html", "loop"),
        ("--html", "loop", "symlink loop")),
    Row("report-html-missing-directory", ("report", "notdb.sqlite", "--html", "nodir/r.html"),
        ("--html", "nodir", "does not exist")),
    # sandbox
    Row("sandbox-port-out-of-range", ("sandbox", "--port", "99999"), ("--port", "99999", "0 to 65535")),
    Row("sandbox-port-negative", ("sandbox", "--port", "-1"), ("--port", "0 to 65535")),
    Row("sandbox-log-level", ("sandbox", "--port", "0", "--log-level", "loud"),
        ("--log-level", "loud", "warning")),
    Row("sandbox-host-not-loopback", ("sandbox", "--port", "0", "--host", "192.0.2.1"),
        ("--host", "loopback")),
    Row("sandbox-fixtures-missing", ("sandbox", "--port", "0", "--fixtures", "missing.json"),
        ("--fixtures", "missing.json", "no such file")),
    Row("sandbox-limit-negative", ("sandbox", "--port", "0", "--limit", "-3"), ("--limit", "-3")),
    Row("sandbox-fault-share", ("sandbox", "--port", "0", "--fault-5xx", "7"),
        ("--fault-5xx", "between 0 and 1")),
    Row("sandbox-fault-shares-add-up",
        ("sandbox", "--port", "0", "--fault-5xx", "0.6", "--fault-reset", "0.6"),
        ("--fault-5xx + --fault-reset", "must not exceed 1")),
    # gateway
    Row("gateway-db-missing-directory", ("gateway", "--provider", "http://127.0.0.1:9", "--port", "0",
                                         "--db", "nodir/facts.sqlite"),
        ("--db", "nodir", "does not exist")),
    Row("gateway-db-not-a-database", ("gateway", "--provider", "http://127.0.0.1:9", "--port", "0",
                                      "--db", "notdb.sqlite"),
        ("--db", "notdb.sqlite", "not an SQLite database")),
    Row("gateway-db-directory", ("gateway", "--provider", "http://127.0.0.1:9", "--port", "0",
                                 "--db", "."),
        ("--db", "directory")),
    Row("gateway-port-out-of-range", ("gateway", "--provider", "http://127.0.0.1:9", "--port", "99999",
                                      "--db", "facts.sqlite"),
        ("--port", "99999", "0 to 65535")),
    Row("gateway-log-level", ("gateway", "--provider", "http://127.0.0.1:9", "--port", "0",
                              "--db", "facts.sqlite", "--log-level", "loud"),
        ("--log-level", "loud")),
    Row("gateway-provider-not-http", ("gateway", "--provider", "ftp://x", "--port", "0",
                                      "--db", "facts.sqlite"),
        ("--provider", "http")),
    Row("gateway-deadline-zero", ("gateway", "--provider", "http://127.0.0.1:9", "--port", "0",
                                  "--db", "facts.sqlite", "--deadline", "0"),
        ("--deadline", "positive")),
    Row("gateway-audit-missing-directory", ("gateway", "--provider", "http://127.0.0.1:9", "--port", "0",
                                            "--db", "facts.sqlite", "--audit", "nodir/audit.jsonl"),
        ("--audit", "nodir", "does not exist")),
    Row("gateway-db-foreign-database", ("gateway", "--provider", "http://127.0.0.1:9", "--port", "0",
                                        "--db", "other-app.sqlite"),
        ("--db", "other-app.sqlite", "not a gateway database", "notes", "unchanged")),
    Row("gateway-db-foreign-application-id", ("gateway", "--provider", "http://127.0.0.1:9",
                                              "--port", "0", "--db", "other-app-id.sqlite"),
        ("--db", "other-app-id.sqlite", "another application's", "unchanged")),
    Row("gateway-db-a-state-file", ("gateway", "--provider", "http://127.0.0.1:9", "--port", "0",
                                    "--db", "state.sqlite"),
        ("--db", "state.sqlite", "not a gateway database", "meta")),
    Row("gateway-db-symlink-loop", ("gateway", "--provider", "http://127.0.0.1:9", "--port", "0",
                                    "--db", "loop"),
        ("--db", "loop", "symlink loop")),
    Row("gateway-audit-symlink-loop", ("gateway", "--provider", "http://127.0.0.1:9", "--port", "0",
                                       "--db", "facts.sqlite", "--audit", "loop"),
        ("--audit", "loop", "symlink loop")),
    Row("gateway-audit-unwritable", ("gateway", "--provider", "http://127.0.0.1:9", "--port", "0",
                                     "--db", "facts.sqlite", "--audit", "unwritable.jsonl"),
        ("--audit", "unwritable.jsonl", "cannot write", "permission denied")),
    Row("gateway-header-env-unset", ("gateway", "--provider", "http://127.0.0.1:9", "--port", "0",
                                     "--db", "facts.sqlite", "--provider-header-env",
                                     "Authorization=RB_UNSET_VAR"),
        ("--provider-header-env", "RB_UNSET_VAR", "not set")),
]


def _prepare(directory: Path) -> None:
    (directory / "urls.txt").write_text("http://127.0.0.1:9/rentals/1/availability\n", "utf-8")
    (directory / "bad-urls.txt").write_text("ftp://example.com/x\n", "utf-8")
    (directory / "binary.bin").write_bytes(b"\xff\xfe\x00\x01garbage")
    (directory / "notdb.sqlite").write_text("these are not the bytes of a database\n", "utf-8")
    (directory / "empty.jsonl").write_text("", "utf-8")
    (directory / "bad.toml").write_text("max_attempts = = 3\n", "utf-8")
    (directory / "no-cases.json").write_text('{"defaults": {}}\n', "utf-8")
    (directory / "loop").symlink_to("loop")
    _database(directory / "other-app.sqlite", "CREATE TABLE notes (body TEXT)",
              "INSERT INTO notes VALUES ('mine')")
    _database(directory / "other-app-id.sqlite", "PRAGMA application_id = 1234")
    _database(directory / "state.sqlite", "CREATE TABLE meta (key TEXT, value TEXT)",
              "CREATE TABLE queue_ops (id TEXT)")
    _database(directory / "gateway.sqlite", "CREATE TABLE rentals (rental_id TEXT)")
    _unwritable(directory / "unwritable.jsonl")
    (directory / "bad-number.json").write_text(
        '{"cases": [{"id": "A01", "max_attempts": "three", "script": [], "expect": {}}]}\n', "utf-8")


def _database(path: Path, *statements: str) -> None:
    with contextlib.closing(sqlite3.connect(path)) as db:
        for statement in statements:
            db.execute(statement)
        db.commit()


def _unwritable(path: Path) -> None:
    """A file this process cannot write to, even as root (where modes are not enough)."""
    path.write_text("", "utf-8")
    if os.geteuid() != 0:
        path.chmod(0o444)
        return
    kernel = Path("/sys/kernel/notes")  # 0400 on sysfs: even root cannot open it to write
    if not kernel.exists():
        pytest.skip("running as root with no file root cannot write")
    path.unlink()
    path.symlink_to(kernel)


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() if p.is_file() else b"<dir>"
            for p in sorted(directory.rglob("*"))}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("bad-input")
    _prepare(directory)
    return directory


def run_cli(argv: tuple[str, ...], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "RB_UNSET_VAR"}
    env["COLUMNS"] = "100"
    return subprocess.run([sys.executable, "-m", "retrybudget", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def test_the_table_covers_every_command() -> None:
    from retrybudget.cli._main import _COMMANDS

    covered = {row.argv[0] for row in ROWS}
    assert set(_COMMANDS) - {"offline-demo"} <= covered


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_bad_input_is_one_line_exit_2_and_nothing_written(row: Row, workdir: Path) -> None:
    before = _snapshot(workdir)
    result = run_cli(row.argv, workdir)
    lines = result.stderr.splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert line.startswith(f"retrybudget {row.argv[0]}: "), line
    for words in row.words:
        assert words in line, line
    for wording in PYTHON_WORDING:
        assert wording not in line, line
    assert "listening" not in result.stdout
    assert _snapshot(workdir) == before
