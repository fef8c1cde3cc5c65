"""The local Store: every aggregate's SQLite adapter over one database file."""

from forkhorse.adapters.sqlite.leases import SqliteLeases
from forkhorse.adapters.sqlite.principals import SqlitePrincipals
from forkhorse.adapters.sqlite.projects import SqliteProjects
from forkhorse.adapters.sqlite.promotions import SqlitePromotions
from forkhorse.adapters.sqlite.records import SqliteRecords
from forkhorse.adapters.sqlite.reviews import SqliteReviews


class SqliteStore(
    SqlitePrincipals,
    SqliteProjects,
    SqliteLeases,
    SqliteReviews,
    SqlitePromotions,
    SqliteRecords,
):
    """The `Store`: each aggregate's methods come from its mixin; all share one
    `SqliteDatabase` (connections, schema, transactions)."""
