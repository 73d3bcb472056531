"""Every link and file reference in the docs (and in the package's docstrings) resolves in the repo.

- a markdown link ``[text](target)`` outside code blocks: the file exists (relative to the page)
  and its ``#anchor``, if any, is a heading of that file (GitHub's slugs);
- a path under ``src/``, ``tests/``, ``benchmarks/``, ``tools/``, ``docs/`` or ``.ci/`` anywhere in a page
  exists, and so does a test file named alone (``test_rules.py::...``);
- a ``*.md`` file named in a page or a docstring exists, beside the page or at the repo root.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"(?<!\!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")
PATH = re.compile(r"(?<![\w./-])((?:src|tests|benchmarks|tools|docs|\.ci)/[\w./-]*[\w/])")
TEST_FILE = re.compile(r"(?<![\w./-])(test_\w+\.py)\b")
MD_NAME = re.compile(r"(?<![\w/.-])([\w./-]*\w\.md)\b")
EXTERNAL_LINK = re.compile(r"\[[^\]]*\]\(https?://[^)\s]*\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
EXTERNAL = ("http://", "https://", "mailto:")


def pages() -> list[Path]:
    """The markdown files a reader of the repo sees."""
    return sorted([*ROOT.glob("*.md"), *(ROOT / "docs").glob("*.md")])


def _outside_fences(text: str) -> Iterator[tuple[int, str]]:
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a markdown file (a repeated heading gets ``-1``, ``-2``…)."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line in _outside_fences(path.read_text(encoding="utf-8")):
        if (match := HEADING.match(line)) is None:
            continue
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(path: Path) -> list[str]:
    """The links of one page that do not resolve."""
    problems = []
    text = path.read_text(encoding="utf-8")
    for number, line in _outside_fences(text):
        for match in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
            target = match.group(1) or match.group(2)
            if target.startswith(EXTERNAL):
                continue
            file_part, _, anchor = target.partition("#")
            resolved = (path.parent / file_part).resolve() if file_part else path
            where = f"{path.relative_to(ROOT)}:{number}: {target}"
            if not resolved.exists():
                problems.append(f"{where}: no such file")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                problems.append(f"{where}: no heading #{anchor}")
    return problems


def _md_exists(name: str, beside: Path) -> bool:
    return (beside / name).exists() or (ROOT / name).exists() or (ROOT / "docs" / name).exists()


def broken_references(path: Path) -> list[str]:
    """The file references of one page that name nothing in the repo."""
    problems = []
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        where = f"{path.relative_to(ROOT)}:{number}"
        line = EXTERNAL_LINK.sub("", text)  # a link to another site names no file of this repo
        problems += [f"{where}: {ref}: no such file" for ref in PATH.findall(line)
                     if not (ROOT / ref).exists()]
        problems += [f"{where}: {ref}: no such test file" for ref in TEST_FILE.findall(line)
                     if not list(ROOT.glob(f"tests/**/{ref}"))]
        problems += [f"{where}: {ref}: no such page" for ref in MD_NAME.findall(line)
                     if not _md_exists(ref, path.parent)]
    return problems


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_reference_resolves(page: Path) -> None:
    assert broken_references(page) == []


def test_docstrings_name_only_pages_that_exist() -> None:
    problems = []
    for source in sorted((ROOT / "src").rglob("*.py")):
        for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), 1):
            problems += [f"{source.relative_to(ROOT)}:{number}: {ref}" for ref in MD_NAME.findall(line)
                         if not _md_exists(ref, source.parent)]
    assert problems == []


def test_the_checker_sees_a_broken_link_and_a_missing_page(tmp_path: Path) -> None:
    page = ROOT / "docs" / "design.md"
    assert "the-rules" in anchors(page)
    assert slug("`retrybudget check`") == "retrybudget-check"
    assert slug("The interactive contract (the gateway's lookup)") == (
        "the-interactive-contract-the-gateways-lookup")
    assert LINK.search("see [x](nowhere.md#a)") is not None
    assert MD_NAME.findall("the contract (DESIGN.md section 4)") == ["DESIGN.md"]
    assert not _md_exists("DESIGN.md", page.parent)
