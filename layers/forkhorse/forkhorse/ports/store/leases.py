"""Leases that expire at the caller's clock: an agent's claim on a packet, and the
per-project workflow lease whose fencing tokens guard promotion."""

from datetime import datetime, timedelta
from typing import Protocol

from forkhorse.domain.model import Claim


class LeaseStore(Protocol):
    # --- claims: leases on packets -----------------------------------------------------
    def claim_packet(
        self, packet_id: str, agent_id: str, ttl: timedelta, now: datetime
    ) -> Claim | None:
        """Claim or renew (the caller's own live claim) until `now + ttl`.

        None while another agent holds a live claim.
        """
        ...

    def release_claim(self, packet_id: str, agent_id: str) -> bool:
        """Drop the agent's claim; False if the agent holds none."""
        ...

    def live_claim(self, packet_id: str, now: datetime) -> Claim | None: ...

    def live_claims(self, packet_ids: list[str], now: datetime) -> dict[str, Claim]:
        """The live claims among these packets, by packet id, in one read."""
        ...

    # --- the per-project workflow lease ---------------------------------------------
    def acquire_lease(
        self, project_id: str, holder: str, ttl: timedelta, now: datetime
    ) -> int | None:
        """Take the lease if it is free, expired or already the holder's; returns a new
        fencing token, greater than every earlier one. None while someone else holds it."""
        ...

    def renew_lease(
        self, project_id: str, holder: str, token: int, ttl: timedelta, now: datetime
    ) -> bool: ...

    def release_lease(self, project_id: str, holder: str, token: int) -> bool: ...

    def check_fence(self, project_id: str, token: int, now: datetime) -> bool:
        """True while `token` is the project's current, live lease."""
        ...
