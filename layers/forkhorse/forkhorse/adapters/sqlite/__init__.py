"""The SQLite adapters of the Store ports: one module per aggregate over `database`."""

from forkhorse.adapters.sqlite.database import DATABASE_NAME
from forkhorse.adapters.sqlite.store import SqliteStore

__all__ = ["DATABASE_NAME", "SqliteStore"]
