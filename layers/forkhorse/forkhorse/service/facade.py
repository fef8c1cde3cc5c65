"""One object per deployment: the use cases, sharing one context."""

from __future__ import annotations

from forkhorse.attest.attestor import Attestor
from forkhorse.ports.ancestry import CommitAncestry
from forkhorse.ports.clock import Clock
from forkhorse.ports.git import GitHost
from forkhorse.ports.orchestrator import Orchestrator
from forkhorse.ports.store import Store
from forkhorse.service.ancestry import GenerationAncestry
from forkhorse.service.approvals import Approvals
from forkhorse.service.attestations import Attestations
from forkhorse.service.context import Context, ServiceSettings
from forkhorse.service.identity import Caller, token_hash
from forkhorse.service.inspection import Inspection
from forkhorse.service.listings import Listings
from forkhorse.service.log_events import GateLog
from forkhorse.service.projects import Projects
from forkhorse.service.promote.request import Promotions
from forkhorse.service.reviews import Reviews

__all__ = ["Service", "ServiceSettings"]


class Service:
    def __init__(
        self,
        store: Store,
        git: GitHost,
        orchestrator: Orchestrator,
        clock: Clock,
        settings: ServiceSettings | None = None,
        attestor: Attestor | None = None,
        ancestry: CommitAncestry | None = None,
        gate_log: GateLog | None = None,
    ) -> None:
        """Promotes run as workflows the orchestrator starts (`start_promote`)."""
        self.context = Context(
            store,
            git,
            orchestrator,
            clock,
            settings or ServiceSettings(),
            attestor,
            ancestry or GenerationAncestry(),
            gate_log or GateLog(),
        )
        self.log = self.context.gate_log.log  # None where no log is kept
        self.projects = Projects(self.context)
        self.reviews = Reviews(self.context)
        self.listings = Listings(self.context)
        self.approvals = Approvals(self.context)
        self.promotions = Promotions(self.context)
        self.attestations = Attestations(self.context)
        self.inspection = Inspection(self.context, self.approvals, self.promotions)

    def authenticate(self, token: str) -> Caller | None:
        """The live principal behind a bearer token; None if unknown or revoked."""
        principal = self.context.store.find_principal_by_token_hash(token_hash(token))
        if principal is None or principal.revoked:
            return None
        return Caller(principal.id, principal.kind)

    def shutdown(self) -> None:
        """Nothing of its own to stop: workflows belong to the orchestrator."""
