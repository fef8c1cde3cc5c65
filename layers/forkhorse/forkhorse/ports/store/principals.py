"""Principals: owners and agents, stored with their token's hash only."""

from typing import Protocol

from forkhorse.domain.model import Principal


class PrincipalStore(Protocol):
    def create_principal(self, principal: Principal, token_hash: str) -> bool:
        """Store an owner or agent with the hash of its token; False if the id or hash exists."""
        ...

    def get_principal(self, principal_id: str) -> Principal | None: ...

    def list_agents(self) -> list[Principal]: ...

    def find_principal_by_token_hash(self, token_hash: str) -> Principal | None:
        """The live principal this token hash names; None if unknown or revoked."""
        ...

    def revoke_principal(self, principal_id: str) -> bool:
        """Revoke for good: its token hash stops resolving. False if unknown."""
        ...
