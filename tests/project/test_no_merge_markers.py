"""No file the repo tracks holds a merge's conflict markers: a line that opens, splits or closes
a conflict (``<<<<<<< ``, ``=======`` alone, ``>>>>>>> ``) left in a page or a module is a merge
that was never finished, whatever else still passes."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^(?:<{7} |>{7} |={7}$)", re.MULTILINE)


def tracked_text_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    names = [n for n in listed.stdout.decode().split("\0") if n]
    return [ROOT / n for n in names if (ROOT / n).suffix in {".py", ".md", ".pyi", ".lua", ".toml",
                                                             ".json", ".cfg", ".txt", ""}]


def conflicts(text: str) -> list[int]:
    """The line numbers of ``text`` that are conflict markers."""
    return [text.count("\n", 0, m.start()) + 1 for m in MARKER.finditer(text)]


def test_the_marker_pattern_finds_a_conflict_and_nothing_else() -> None:
    conflict = "a\n<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> main\nb\n"
    assert conflicts(conflict) == [2, 4, 6]
    assert conflicts("title\n=======\n") == [2]  # a setext heading of exactly seven is refused too
    assert conflicts("heading\n========\n`<<<<<<<` in prose\n") == []


def test_no_tracked_file_holds_conflict_markers() -> None:
    files = tracked_text_files()
    assert len(files) > 100  # the listing found the repo's files
    found = {str(f.relative_to(ROOT)): lines for f in files if f.is_file()
             for lines in [conflicts(f.read_text(encoding="utf-8", errors="replace"))] if lines}
    assert found == {}
