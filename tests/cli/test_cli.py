"""The command line: help, bad input (exit 2, one line, state untouched), report, policies.

Every command runs as a subprocess (``python -m retrybudget``), as a user would run it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from retrybudget._cmdline import CliError
from retrybudget.cli._policy import load_policy, with_overrides
from retrybudget.observe import REPORT_KEYS
from retrybudget.sandbox import SandboxServer, serve_in_thread
from tests.support.cli import digest, one_line_error, read_lines, run_cli, write_urls

COMMANDS = ("demo", "fetch", "check", "report", "sandbox", "gateway", "offline-demo")


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    with serve_in_thread() as server:
        yield server


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_an_example(command: str) -> None:
    result = run_cli(command, "--help")
    assert result.returncode == 0, result.stderr
    assert "example" in result.stdout
    assert f"retrybudget {command}" in result.stdout


def test_no_command_prints_help_and_exits_2() -> None:
    result = run_cli()
    assert result.returncode == 2
    for command in COMMANDS:
        assert command in result.stdout


def test_offline_demo_is_kept() -> None:
    result = run_cli("offline-demo")
    assert result.returncode == 0, result.stdout
    assert "18 passed, 0 failed" in result.stdout


# Bad input: exit status 2, one line on stderr naming the file (and line), nothing written ---


def _fetch_bad(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> str:
    state = tmp_path / "s.sqlite"
    result = run_cli("fetch", *args, "--state", str(state), "--out", str(tmp_path / "r.jsonl"),
                     "--audit", str(tmp_path / "a.jsonl"), cwd=tmp_path, env=env)
    line = one_line_error(result)
    assert not state.exists(), "bad input must not create the state"
    assert not (tmp_path / "r.jsonl").exists()
    return line


def test_missing_input_file(tmp_path: Path) -> None:
    assert "nope.txt: no such file" in _fetch_bad(tmp_path, "nope.txt")


def test_malformed_jsonl_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": "a", "url": "http://127.0.0.1:1/a"}\n# comment\n{"id": "b", "url": \n')
    line = _fetch_bad(tmp_path, str(path))
    assert f"{path}:3: invalid JSON" in line


def test_bad_url_names_file_and_line(tmp_path: Path) -> None:
    path = write_urls(tmp_path / "in.txt", ["http://127.0.0.1:1/a", "ftp://example.com/x"])
    line = _fetch_bad(tmp_path, str(path))
    assert f"{path}:2: bad URL" in line
    assert "http and https" in line


def test_bad_url_message_redacts_secrets(tmp_path: Path) -> None:
    path = write_urls(tmp_path / "in.txt", ["http://user:hunter2@:99999/x?token=abc123"])
    line = _fetch_bad(tmp_path, str(path))
    assert "hunter2" not in line
    assert "abc123" not in line


def test_duplicate_id(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": "a", "url": "http://127.0.0.1:1/a"}\n{"id": "a", "url": "http://127.0.0.1:1/b"}\n')
    assert "duplicate id 'a' (first on line 1)" in _fetch_bad(tmp_path, str(path))


@pytest.mark.parametrize(("args", "fragments"), [
    (("--header", "Authorization: env:RB_TEST_UNSET_TOKEN"), ("RB_TEST_UNSET_TOKEN", "not set")),
    (("--profile", "bitbucket"), ("--profile bitbucket: unknown provider profile", "github")),
    (("--redis", "unix:///nonexistent/no-such.sock"), ("Redis is unreachable",)),
    (("--workers", "0"), ("--workers", "at least 1")),
    (("--deadline", "nan"), ("--deadline", "positive number of seconds")),
])
def test_bad_option(tmp_path: Path, args: tuple[str, ...], fragments: tuple[str, ...]) -> None:
    path = write_urls(tmp_path / "in.txt", ["http://127.0.0.1:1/a"])
    line = _fetch_bad(tmp_path, str(path), *args)
    for fragment in fragments:
        assert fragment in line


@pytest.mark.parametrize(("name", "text", "message"), [
    ("p.toml", "max_attempts = [", "invalid TOML"),
    ("p.toml", "max_atempts = 3", "unknown key(s) max_atempts"),
    ("p.toml", "max_attempts = 0", "max_attempts must be between 1 and 100"),
    ("p.json", '{"deadline": -1}', "deadline must be a finite, non-negative duration"),
    ("p.json", '{"deadline": 5,\n "rate_limit": }', "line 2: invalid JSON"),
    ("p.yaml", "max_attempts: 3", "a policy file ends in .toml or .json"),
])
def test_invalid_policy_file(tmp_path: Path, name: str, text: str, message: str) -> None:
    (tmp_path / name).write_text(text)
    path = write_urls(tmp_path / "in.txt", ["http://127.0.0.1:1/a"])
    line = _fetch_bad(tmp_path, str(path), "--policy", str(tmp_path / name))
    assert str(tmp_path / name) in line
    assert message in line


def test_bad_input_leaves_an_existing_state_untouched(tmp_path: Path, sandbox: SandboxServer) -> None:
    urls = write_urls(tmp_path / "in.txt", [sandbox.url(f"/rentals/{i}/availability") for i in (1, 2)])
    files = ("--state", str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "r.jsonl"),
             "--audit", str(tmp_path / "a.jsonl"))
    first = run_cli("fetch", str(urls), "--quiet", *files, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    kept = [tmp_path / n for n in ("s.sqlite", "r.jsonl", "a.jsonl")]
    before = digest(*kept)
    (tmp_path / "bad.toml").write_text("deadline = 'soon'")
    one_line_error(run_cli("fetch", str(urls), "--policy", str(tmp_path / "bad.toml"), *files,
                           cwd=tmp_path))
    # The same ids now naming other URLs: refused before anything changes.
    write_urls(urls, [sandbox.url(f"/rentals/{i}/availability") for i in (7, 8)])
    line = one_line_error(run_cli("fetch", str(urls), *files, cwd=tmp_path))
    assert "now names a different URL" in line
    assert digest(*kept) == before


def test_check_with_malformed_fixtures(tmp_path: Path) -> None:
    path = tmp_path / "cases.json"
    path.write_text('{"cases": [\n  {"id": "X1",\n')
    line = one_line_error(run_cli("check", "--fixtures", str(path)))
    assert str(path) in line
    assert "line" in line


def test_check_names_an_unknown_case_in_one_line() -> None:
    line = one_line_error(run_cli("check", "--only", "Z99"))
    assert "--only Z99: no such case or rule" in line


def test_check_refuses_a_script_the_sandbox_refuses_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "cases.json"
    path.write_text(json.dumps({"cases": [{"id": "X1", "script": [{"status": 99}],
                                           "expect": {"outcome": "ok"}}]}))
    line = one_line_error(run_cli("check", "--fixtures", str(path), "--only", "X1"))
    assert "case X1: the sandbox refused its script" in line
    assert "status" in line


# report ------------------------------------------------------------------------------------


def test_report_prints_the_review_json(tmp_path: Path, sandbox: SandboxServer) -> None:
    urls = write_urls(tmp_path / "in.txt", [sandbox.url("/rentals/1/availability"),
                                            sandbox.url("/rentals/999999/availability")])
    audit = tmp_path / "a.jsonl"
    run = run_cli("fetch", str(urls), "--quiet", "--audit", str(audit), "--state",
                  str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "r.jsonl"), cwd=tmp_path)
    assert run.returncode == 1, run.stderr  # one lookup is a 404: a failed operation
    # workers append results as operations finish, so the order of the two lines may vary
    outcomes = sorted(line["outcome"] for line in read_lines(tmp_path / "r.jsonl"))
    assert outcomes == ["not_found", "ok"]
    result = run_cli("report", str(audit), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert tuple(report) == REPORT_KEYS


def test_retry_failed_runs_only_the_failed_operations_again(tmp_path: Path,
                                                           sandbox: SandboxServer) -> None:
    missing = "/rentals/424242/availability"
    urls = write_urls(tmp_path / "in.txt", [sandbox.url("/rentals/3/availability"), sandbox.url(missing)])
    files = ("--quiet", "--state", str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "r.jsonl"),
             "--audit", str(tmp_path / "a.jsonl"))

    def requests_for(path: str) -> int:
        return sum(r["path"] == path for r in sandbox.stats()["requests"])

    first = run_cli("fetch", str(urls), *files, cwd=tmp_path)
    assert first.returncode == 1  # this run recorded a failure
    assert "1 failed:" in first.stdout
    assert "line-2  not_found  HTTP 404" in first.stdout
    rerun = run_cli("fetch", str(urls), *files, cwd=tmp_path)
    assert rerun.returncode == 0, rerun.stdout  # the 404 is finished: nothing is left to do
    assert requests_for(missing) == 1
    again = run_cli("fetch", str(urls), "--retry-failed", *files, cwd=tmp_path)
    assert again.returncode == 1  # run again, failed again
    assert "1 failed re-opened" in again.stdout
    assert requests_for(missing) == 2
    assert requests_for("/rentals/3/availability") == 1
    assert sorted(line["id"] for line in read_lines(tmp_path / "r.jsonl")) == ["line-1", "line-2"]


def test_secrets_never_reach_results_audit_state_or_terminal(tmp_path: Path,
                                                             sandbox: SandboxServer) -> None:
    token, key, query = "ghp_" + "a1B2" * 9, "key-" + "x9" * 12, "q" * 24
    path = tmp_path / "in.jsonl"
    first = {"id": "one", "url": sandbox.url(f"/rentals/1/availability?access_token={query}"),
             "headers": {"X-Api-Key": "env:RB_TEST_KEY"}}
    path.write_text(json.dumps(first) + "\n" + sandbox.url("/rentals/2/availability") + "\n")
    result = run_cli("fetch", str(path), "--header", "Authorization: env:RB_TEST_TOKEN", cwd=tmp_path,
                     env={"RB_TEST_TOKEN": f"Bearer {token}", "RB_TEST_KEY": key})
    assert result.returncode == 0, result.stderr
    written = b"".join(p.read_bytes() for p in (tmp_path / "out").iterdir())
    assert len(list((tmp_path / "out").iterdir())) >= 3  # results, audit, state (+ its lock)
    for secret in (token, key, query):
        assert secret.encode() not in written
        assert secret not in result.stdout + result.stderr
    by_id = {line["id"]: line for line in read_lines(tmp_path / "out" / "in.results.jsonl")}
    assert by_id["one"]["url"].endswith("access_token=[REDACTED]")


def test_credentials_of_any_spelling_never_reach_fetch_output(tmp_path: Path,
                                                               sandbox: SandboxServer) -> None:
    names = ("accessToken", "apiToken", "authToken", "clientSecret", "refreshToken",
             "sessionToken", "privateKey", "authorization", "Api-Key", "CLIENT_SECRET")
    secrets = {name: f"Sx{index}q7Lm{index}Zr0Pw{index}" for index, name in enumerate(names)}
    query = "&".join(f"{name}={value}" for name, value in secrets.items())
    url = sandbox.url(f"/rentals/1/availability?page=2&{query}")
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"id": "one", "url": url}) + "\n")
    result = run_cli("fetch", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = tmp_path / "out"
    (audit,) = (p for p in out.iterdir() if p.name.endswith("audit.jsonl"))
    report = run_cli("report", str(audit))
    assert report.returncode == 0, report.stderr
    written = b"".join(p.read_bytes() for p in out.iterdir())
    for value in secrets.values():
        assert value.encode() not in written
        assert value not in result.stdout + result.stderr + report.stdout + report.stderr
    (line,) = read_lines(out / "in.results.jsonl")
    assert "?page=2&" in line["url"]  # a non-secret parameter survives


def test_report_names_the_bad_line(tmp_path: Path) -> None:
    audit = tmp_path / "a.jsonl"
    audit.write_text('{"schema": "nope"}\n')
    line = one_line_error(run_cli("report", str(audit)))
    assert f"{audit}: line 1:" in line
    assert "no such file" in one_line_error(run_cli("report", str(tmp_path / "missing.jsonl")))


# policy files (in process: the parsing rules) ----------------------------------------------


def test_policy_file_keys_mirror_policy_fields(tmp_path: Path) -> None:
    path = tmp_path / "nightly.toml"
    path.write_text('base = "background"\nmax_attempts = 4\ndeadline = 120\n'
                    'rate_limit = "fail_fast"\nidempotent_methods = ["GET", "PUT"]\n'
                    '[backoff]\nbase = 0.5\n[profile]\nbase = "github"\nreset_slack = 2\n')
    user = load_policy(str(path))
    p = user.policy
    assert (p.name, p.max_attempts, p.deadline, p.rate_limit.value) == ("nightly", 4, 120.0, "fail_fast")
    assert p.idempotent_methods == frozenset({"GET", "PUT"})
    assert p.backoff.base == 0.5
    assert p.backoff.cap == 60.0
    assert p.profile.reset_slack == 2.0
    assert p.profile.rate_limit_floor == 60.0
    assert dict(user.profile_changes) == {"reset_slack": 2}


def test_policy_file_without_deadline(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text('deadline = "none"\n')
    (tmp_path / "b.json").write_text('{"deadline": null, "max_attempts": 100}')
    assert load_policy(str(tmp_path / "a.toml")).policy.deadline is None
    assert load_policy(str(tmp_path / "b.json")).policy.max_attempts == 100


def test_overrides_and_presets() -> None:
    user = with_overrides(load_policy("interactive"), profile="stripe", deadline=3, attempts=2)
    assert (user.policy.profile.name, user.policy.deadline, user.policy.max_attempts) == ("stripe", 3, 2)
    with pytest.raises(CliError, match="unknown provider profile"):
        with_overrides(user, profile="nope")


def test_fetch_records_an_ok_whose_body_broke_after_the_handover(tmp_path: Path) -> None:
    """The operation ended ok at its 200; the body the job then reads is cut short: the line is
    the operation's outcome with no payload, and the job goes on (no worker stops)."""
    head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n"
            b"Connection: close\r\n\r\n{\"avail")
    served: list[int] = []
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(30)

        def serve() -> None:
            for _ in range(3):  # bounded: one request is expected
                try:
                    conn, _address = listener.accept()
                except OSError:
                    return
                with conn:
                    conn.recv(65536)
                    conn.sendall(head)
                    served.append(1)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        port = listener.getsockname()[1]
        path = tmp_path / "in.jsonl"
        path.write_text(json.dumps({"id": "cut", "url": f"http://127.0.0.1:{port}/r/1"}) + "\n")
        result = run_cli("fetch", str(path), "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (line,) = read_lines(tmp_path / "out" / "in.results.jsonl")
    assert (line["id"], line["outcome"], line["ok"], line["status"]) == ("cut", "ok", True, 200)
    assert (line["attempts"], line["value"]) == (1, None)
    assert served == [1]


# a closed stdout -------------------------------------------------------------------------------


def _with_closed_stdout(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the command with a stdout whose reader is already gone (``| head`` that exited)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "retrybudget", *args], cwd=cwd, stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=60, check=False)
    finally:
        os.close(write)


def test_a_closed_stdout_pipe_ends_every_command_quietly(tmp_path: Path,
                                                         sandbox: SandboxServer) -> None:
    urls = write_urls(tmp_path / "in.txt", [sandbox.url("/rentals/1/availability")])
    state = tmp_path / "s.sqlite"
    fetched = run_cli("fetch", str(urls), "--quiet", "--audit", str(tmp_path / "a.jsonl"),
                      "--state", str(state), cwd=tmp_path)
    assert fetched.returncode == 0, fetched.stderr
    runs = [("report", "a.jsonl"), ("report", "a.jsonl", "--json"), ("offline-demo",),
            ("fetch", "in.txt", "--quiet", "--state", "s.sqlite", "--audit", "a.jsonl"),
            ("queue", "status", "s.sqlite")]
    for argv in runs:
        result = _with_closed_stdout(*argv, cwd=tmp_path)
        assert result.stderr == "", (argv, result.stderr)
        assert result.returncode == 1, (argv, result.returncode)  # rich's own status for it
    for argv in [("--help",), ("report", "--help")]:  # argparse ignores the error: still 0
        result = _with_closed_stdout(*argv, cwd=tmp_path)
        assert (result.returncode, result.stderr) == (0, ""), argv
