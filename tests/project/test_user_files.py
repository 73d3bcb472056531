"""The libraries' own SQLite files: another application's database is refused, byte for byte
unchanged, and the files retrybudget creates carry its marker (``PRAGMA application_id``)."""

from __future__ import annotations

import contextlib
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrybudget._files import APPLICATION_ID, check_own_database, check_writable
from retrybudget.gateway._store import TABLES, FactStore
from retrybudget.queue import QueueError, SqliteQueue


def _foreign(path: Path) -> bytes:
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE notes (body TEXT)")
        db.execute("INSERT INTO notes VALUES ('mine')")
        db.commit()
    return path.read_bytes()


def _application_id(path: Path) -> int:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return int(db.execute("PRAGMA application_id").fetchone()[0])


@pytest.mark.parametrize(("opener", "refusal"), [
    (FactStore, r"^\S+: not a gateway database .*notes.*left unchanged$"),
    (SqliteQueue, r"^\S+: not a queue .*without a queue_ops table.*left unchanged$"),
], ids=["gateway-store", "queue"])
def test_a_foreign_database_is_refused_unchanged(tmp_path: Path, opener: Any, refusal: str) -> None:
    path = tmp_path / "other.sqlite"
    before = _foreign(path)
    with pytest.raises((ValueError, QueueError), match=refusal):
        opener(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.sqlite"]  # no -wal, no -shm


def test_files_retrybudget_creates_carry_its_marker_and_are_accepted_again(tmp_path: Path) -> None:
    store = FactStore(tmp_path / "gateway.sqlite")
    store.close()
    queue = SqliteQueue(tmp_path / "queue.sqlite")
    queue.close()
    for name in ("gateway.sqlite", "queue.sqlite"):
        assert _application_id(tmp_path / name) == APPLICATION_ID
    FactStore(tmp_path / "gateway.sqlite").close()  # its own file: opened again
    with pytest.raises(ValueError, match="other tables: queue_ops"):
        check_own_database(tmp_path / "queue.sqlite", "--db", "a gateway database", TABLES)


def test_another_applications_marker_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "app.sqlite"
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA application_id = 1234")
        db.execute("CREATE TABLE rentals (rental_id TEXT)")  # our table's name, not our file
        db.commit()
    with pytest.raises(ValueError, match="another application's SQLite database"):
        check_own_database(path, "--db", "a gateway database", TABLES)


@pytest.mark.parametrize("relative", ["loop", "loop/below.jsonl"])
def test_a_symlink_loop_is_refused_by_name(tmp_path: Path, relative: str) -> None:
    (tmp_path / "loop").symlink_to("loop")
    with pytest.raises(ValueError, match=r"^--audit .*: a symlink loop$"):
        check_writable(tmp_path / relative, f"--audit {relative}", create_dirs=True)
    with pytest.raises(ValueError, match="a symlink loop"):
        check_own_database(tmp_path / relative, "--db", "a gateway database", TABLES)


NAMES = st.sampled_from(["rentals", "reservations", "notes", "users", "meta", "queue_ops"])


@settings(max_examples=40, deadline=None)
@given(tables=st.sets(NAMES, max_size=4), application_id=st.sampled_from([0, APPLICATION_ID, 77]))
def test_a_database_is_the_gateways_exactly_when_it_holds_only_its_tables(
        tables: set[str], application_id: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "db.sqlite"
        with contextlib.closing(sqlite3.connect(path)) as db:
            db.execute(f"PRAGMA application_id = {application_id}")
            for table in sorted(tables):
                db.execute(f"CREATE TABLE {table} (x)")
            db.commit()
        before = path.read_bytes()
        ours = tables <= set(TABLES) and application_id in (0, APPLICATION_ID)
        if ours:
            check_own_database(path, "--db", "a gateway database", TABLES)
        else:
            with pytest.raises(ValueError, match="left unchanged"):
                check_own_database(path, "--db", "a gateway database", TABLES)
        assert path.read_bytes() == before
        assert sorted(p.name for p in Path(directory).iterdir()) == ["db.sqlite"]
