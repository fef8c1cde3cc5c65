"""The SQLite store's per-thread connections end with their threads: a long-lived server
starts a thread per run, and each used to keep a connection (two open files) for good."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from forkhorse.adapters.sqlite import SqliteStore

THREADS = 40


def _database_files_open(database: Path) -> int:
    """This process's open files on the database and its WAL, read from /proc."""
    names = {str(database), f"{database}-wal", f"{database}-shm"}
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}") in names
        except OSError:
            continue
    return count


def test_connections_of_ended_threads_are_closed(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    store.get_project("p-missing")  # this thread's connection stays while it lives
    held = _database_files_open(store.path)
    assert held > 0
    for _ in range(THREADS):
        worker = threading.Thread(target=store.get_project, args=("p-missing",))
        worker.start()
        worker.join()
    # SQLite keeps one closed connection's descriptor for reuse while other connections of
    # the process hold locks on the file (closing it would drop them).
    deadline = time.monotonic() + 5
    while _database_files_open(store.path) > held + 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _database_files_open(store.path) <= held + 1
    assert store.get_project("p-missing") is None  # this thread's connection still works
    store.close()
    assert _database_files_open(store.path) == 0
