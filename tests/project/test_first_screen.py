"""What a new user meets first: the README's install lines, what each example needs, the
command table, the licence, and ``fetch --help``'s exit statuses, checked against the code."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from retrybudget import _cmdline
from retrybudget._files import toml_table
from retrybudget.cli import _main
from tests.support.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text("utf-8")


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_every_readme_example_says_what_it_needs_and_none_awaits_at_top_level() -> None:
    project = toml_table((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    extras = project["optional-dependencies"]  # type: ignore[index]
    for block in _python_blocks(README):
        needs = re.search(r"^# needs: pip install 'retrybudget\[(\w+)\]'", block, flags=re.M)
        assert needs is not None, block
        assert needs.group(1) in extras, block
        if "127.0.0.1:8080" in block:
            assert "the sandbox on port 8080" in block.splitlines()[0], block
        top = [line for line in block.splitlines() if re.match(r"(await |async (with|for) )", line)]
        assert top == [], block  # runs as written: coroutines go through asyncio.run
    assert "retrybudget sandbox --port 8080" in README
    assert re.search(r"^pip install 'retrybudget\[", README, flags=re.M)


def _subcommands() -> list[str]:
    parser = _main.build_parser()
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(actions[0].choices)


def test_the_command_table_names_every_command() -> None:
    table = [line for line in README.splitlines() if line.startswith("| `retrybudget ")]
    named = {re.match(r"\| `retrybudget ([\w-]+)", line).group(1)  # type: ignore[union-attr]
             for line in table}
    assert named == set(_subcommands())


def test_the_licence_file_matches_the_package_metadata() -> None:
    meta = toml_table((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    assert meta["license"] == "MIT"  # type: ignore[index]
    text = (ROOT / "LICENSE").read_text("utf-8")
    assert text.startswith("MIT License\n")
    assert "retrybudget developers" in text


def test_fetch_help_lists_every_exit_status_fetch_returns() -> None:
    result = run_cli("fetch", "--help")
    assert result.returncode == 0, result.stderr
    listed = {int(n) for n in re.findall(r"^  (\d+) ", result.stdout.split("exit status:")[1],
                                         flags=re.M)}
    returned = {_cmdline.EXIT_OK, _cmdline.EXIT_FAILED, _cmdline.EXIT_BAD_INPUT,
                _cmdline.EXIT_LEFT_TO_DO, _main._INTERRUPTED}
    assert listed == returned
