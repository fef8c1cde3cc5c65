"""The Store: all durable state except git objects, one port per aggregate.

Two adapters implement every port (SQLite locally, DynamoDB on AWS) and pass one
conformance suite (`tests/integration/store/`). Every method that changes state
is atomic; methods returning `bool` report whether their condition held (False
changes nothing). Times are timezone-aware and always passed in by the caller,
so expiry is decided by the caller's clock, never the database's.

Code that needs one or two aggregates takes their ports; `Store` is all of them, for
the composition roots and whatever truly spans the state.
"""

from typing import Protocol

from forkhorse.ports.store.leases import LeaseStore
from forkhorse.ports.store.principals import PrincipalStore
from forkhorse.ports.store.projects import ProjectStore
from forkhorse.ports.store.promotions import PromotionStore
from forkhorse.ports.store.records import RecordRemoval, RecordStore, StaleRecord
from forkhorse.ports.store.reviews import ReviewStore


class Store(
    PrincipalStore,
    ProjectStore,
    LeaseStore,
    ReviewStore,
    PromotionStore,
    RecordStore,
    Protocol,
):
    def close(self) -> None: ...


__all__ = [
    "LeaseStore",
    "PrincipalStore",
    "ProjectStore",
    "PromotionStore",
    "RecordRemoval",
    "RecordStore",
    "ReviewStore",
    "StaleRecord",
    "Store",
]
