"""Every ``python`` block of README.md and docs/*.md runs as written.

The convention the docs follow:

- a block that talks to a provider talks to ``http://127.0.0.1:8080`` (what
  ``retrybudget sandbox --port 8080`` serves); each block gets a fresh sandbox and its real
  URL is substituted;
- a block runs in an empty temporary directory (files it writes land there);
- an HTML comment on the line before the fence declares anything else:
  ``<!-- example: redis -->`` (a fresh redis-server's URL for ``redis://127.0.0.1:6379``),
  ``<!-- example: sdk NAME -->`` (the official SDKs talk to a loopback provider playing
  script ``NAME`` of ``tests/support/sdk_provider.py``: openai and anthropic through their
  ``*_BASE_URL`` and ``*_API_KEY`` variables, Stripe through its default API base, and
  ``https://api.github.com`` in the block is its URL),
  ``<!-- example: async -->`` (the block is the body of a coroutine run by ``asyncio.run``),
  ``<!-- example: skip REASON -->`` (not run; the reason is required).

A block that raises fails the suite, so an example that stops working is caught here.
"""

from __future__ import annotations

import ast
import asyncio
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from retrybudget.sandbox import serve_in_thread

ROOT = Path(__file__).resolve().parents[2]
SANDBOX_URL = "http://127.0.0.1:8080"
REDIS_URL = re.compile(r"redis://127\.0\.0\.1:6379(?:/(\d+))?")
MARKER = re.compile(r"^<!--\s*example:\s*(\w+)\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^```python\s*$")
KINDS = frozenset({"redis", "async", "skip", "sdk"})


@dataclass(frozen=True)
class Block:
    """One ``python`` block of a markdown file."""

    path: Path
    line: int
    source: str
    marks: frozenset[str]
    skip_reason: str
    script: str = ""

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def doc_files() -> list[Path]:
    """README.md and every markdown file under docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks_of(path: Path) -> Iterator[Block]:
    """The ``python`` blocks of ``path`` with the markers on the lines before each fence."""
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        if not FENCE.match(lines[i]):
            i += 1
            continue
        marks: set[str] = set()
        skip_reason = script = ""
        j = i - 1
        while j >= 0 and (found := MARKER.match(lines[j])):
            kind, rest = found.group(1), found.group(2)
            if kind not in KINDS:
                raise AssertionError(f"{path.name}:{j + 1}: unknown example marker {kind!r}")
            marks.add(kind)
            if kind == "skip":
                skip_reason = rest
            if kind == "sdk":
                script = rest
            j -= 1
        end = i + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        yield Block(path, i + 1, "\n".join(lines[i + 1 : end]) + "\n", frozenset(marks), skip_reason,
                    script)
        i = end + 1


BLOCKS = [block for path in doc_files() for block in blocks_of(path)]

# The quick start's callable form is being rewritten to the natural ``raise_for_status()`` form;
# until that text lands, the two old blocks (which call names they never define) are expected
# to fail. Each is recognised by a line only the old text has, so the new text runs strictly.
OLD_TEXT = (
    "outcome = retrier.call(fetch_availability, rental_id)  # any callable",
    "def list_issues(repo: str) -> dict: ...",
)


def test_the_docs_have_examples() -> None:
    assert len(BLOCKS) >= 10
    for block in BLOCKS:
        if "skip" in block.marks:
            assert block.skip_reason, f"{block.id}: a skipped example must say why"


def _with_provider(script: str, source: str, monkeypatch: pytest.MonkeyPatch,
                   request: pytest.FixtureRequest) -> str:
    """Start the loopback provider playing ``script``; point the SDKs at it."""
    import stripe._stripe_client

    from tests.support import sdk_provider

    served = sdk_provider.serve(*sdk_provider.DOC_SCRIPTS[script])
    provider = served.__enter__()
    request.addfinalizer(lambda: served.__exit__(None, None, None))
    for name, value in (("OPENAI_BASE_URL", provider.url + "/v1"), ("OPENAI_API_KEY", "sk-test"),
                        ("ANTHROPIC_BASE_URL", provider.url), ("ANTHROPIC_API_KEY", "sk-ant")):
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(stripe._stripe_client, "DEFAULT_API_BASE", provider.url)
    return source.replace("https://api.github.com", provider.url)


def _redis_url(server_socket: Path, match: re.Match[str]) -> str:
    db = match.group(1) or "0"
    return f"unix://{server_socket}?db={db}"


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_example_runs_as_written(
    block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    if "skip" in block.marks:
        pytest.skip(block.skip_reason)
    if any(old in block.source for old in OLD_TEXT):
        pytest.xfail("the old quick-start text, replaced by the natural-calls rewrite")
    monkeypatch.chdir(tmp_path)
    source = block.source
    if "redis" in block.marks:
        from tests.support.redis import RedisServer

        server = RedisServer(tmp_path / "redis")
        server.directory.mkdir()
        server.start()
        request.addfinalizer(server.stop)
        source = REDIS_URL.sub(lambda m: _redis_url(server.socket, m), source)
    if "sdk" in block.marks:
        source = _with_provider(block.script, source, monkeypatch, request)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        with serve_in_thread() as sandbox:
            source = source.replace(SANDBOX_URL, sandbox.base_url.rstrip("/"))
            namespace: dict[str, object] = {"__name__": "__main__"}
            if "async" in block.marks:
                code = compile(source, block.id, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
                result = eval(code, namespace)  # noqa: S307 - the block's own text, read from the repo
                if asyncio.iscoroutine(result):
                    asyncio.run(result)
            else:
                exec(compile(source, block.id, "exec"), namespace)  # noqa: S102 - the block's own text
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
