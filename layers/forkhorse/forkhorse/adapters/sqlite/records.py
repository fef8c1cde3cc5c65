"""Content-addressed records in SQLite: chunks and manifest in one transaction when they fit
one DynamoDB transaction (the same rule on both Stores); else chunks, then the manifest.

Chunks are BLOBs. Rows an earlier version wrote are TEXT and read back as text: SQLite keeps
each value's own type, so no row needs rewriting."""

import sqlite3
from collections.abc import Iterator, Sequence
from datetime import datetime

from forkhorse.adapters.sqlite.database import SqliteDatabase, to_micros
from forkhorse.domain.canonical import Chunk, StoredChunk
from forkhorse.ports.store import RecordRemoval, StaleRecord
from forkhorse.ports.store.records import fits_one_transaction

_STALE_PAGE = 500


class SqliteRecords(SqliteDatabase):
    @staticmethod
    def _insert_chunks(
        conn: sqlite3.Connection, digest: str, chunks: Sequence[Chunk], written_at: int
    ) -> None:
        conn.executemany(
            "INSERT OR REPLACE INTO record_chunks VALUES (?, ?, ?, ?)",
            ((digest, index, chunk, written_at) for index, chunk in enumerate(chunks)),
        )

    @staticmethod
    def _touch_manifest(conn: sqlite3.Connection, digest: str, written_at: int) -> bool:
        touched = conn.execute(
            "UPDATE records SET written_at = max(written_at, ?) WHERE digest = ?",
            (written_at, digest),
        )
        return touched.rowcount == 1

    def _write_chunks(self, digest: str, chunks: Sequence[Chunk], written_at: int) -> None:
        with self._write() as conn:
            self._insert_chunks(conn, digest, chunks, written_at)

    def _write_manifest(self, digest: str, chunks: Sequence[Chunk], written_at: int) -> None:
        with self._write() as conn:
            if self._touch_manifest(conn, digest, written_at):
                return  # a concurrent put published the same bytes
            stored = conn.execute(
                "SELECT count(*) FROM record_chunks WHERE digest = ? AND idx < ?",
                (digest, len(chunks)),
            ).fetchone()[0]
            if stored != len(chunks):  # a collection took chunks of this unfinished put
                self._insert_chunks(conn, digest, chunks, written_at)
            conn.execute("INSERT INTO records VALUES (?, ?, ?)", (digest, len(chunks), written_at))

    def _fits_one_transaction(self, chunks: Sequence[Chunk]) -> bool:
        return fits_one_transaction(chunks)

    def put_record_chunks(self, digest: str, chunks: Sequence[Chunk], now: datetime) -> None:
        written_at = to_micros(now)
        one = self._fits_one_transaction(chunks)
        with self._write() as conn:
            if self._touch_manifest(conn, digest, written_at):
                return  # content-addressed: the stored record is already these bytes
            if one:  # chunks and manifest commit together: no crash leaves an orphan
                self._insert_chunks(conn, digest, chunks, written_at)
                conn.execute(
                    "INSERT INTO records VALUES (?, ?, ?)", (digest, len(chunks), written_at)
                )
                return
        self._write_chunks(digest, chunks, written_at)
        self._write_manifest(digest, chunks, written_at)

    def get_record_chunks(self, digest: str) -> list[StoredChunk] | None:
        count = self._one("SELECT chunk_count FROM records WHERE digest = ?", digest)
        if count is None:
            return None
        sql = "SELECT chunk FROM record_chunks WHERE digest = ? AND idx < ? ORDER BY idx"
        return [row[0] for row in self._conn().execute(sql, (digest, int(count)))]

    def stale_records(self, written_before: datetime) -> Iterator[StaleRecord]:
        cutoff, after = to_micros(written_before), ""
        while True:  # pages by digest, so deleting between pages is safe
            rows = self._conn().execute(_STALE_SQL, (cutoff, cutoff, after, _STALE_PAGE))
            page = rows.fetchall()
            for digest, has_manifest in page:
                yield StaleRecord(str(digest), bool(has_manifest))
            if len(page) < _STALE_PAGE:
                return
            after = str(page[-1][0])

    def delete_stale_record(self, digest: str, written_before: datetime) -> RecordRemoval:
        cutoff = to_micros(written_before)
        with self._write() as conn:
            manifest = conn.execute(
                "DELETE FROM records WHERE digest = ? AND written_at < ?", (digest, cutoff)
            ).rowcount
            if conn.execute("SELECT 1 FROM records WHERE digest = ?", (digest,)).fetchone():
                return RecordRemoval(manifest=False, chunks=0)  # written again since
            chunks = conn.execute(
                "DELETE FROM record_chunks WHERE digest = ? AND written_at < ?", (digest, cutoff)
            ).rowcount
            return RecordRemoval(manifest=manifest == 1, chunks=chunks)


_STALE_SQL = """
SELECT digest, max(manifest) FROM (
    SELECT digest, 1 AS manifest FROM records WHERE written_at < ?
    UNION ALL
    SELECT DISTINCT c.digest, 0 FROM record_chunks c WHERE c.written_at < ?
        AND NOT EXISTS (SELECT 1 FROM records r WHERE r.digest = c.digest))
WHERE digest > ? GROUP BY digest ORDER BY digest LIMIT ?
"""
