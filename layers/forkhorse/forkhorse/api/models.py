"""Request bodies: strict, camelCase, unknown fields refused (a 400)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

Name = Annotated[str, StringConstraints(min_length=1, max_length=100, strip_whitespace=True)]
Title = Annotated[str, StringConstraints(min_length=1, max_length=500, strip_whitespace=True)]
Sha = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{40}$")]
Id = Annotated[str, StringConstraints(min_length=1, max_length=200)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class CreateProject(_Body):
    name: Name
    require_receipt: bool = Field(default=True, alias="requireReceipt")


class Settings(_Body):
    """Exactly `{"requireReceipt": true}` or `{"requireReceipt": false}`."""

    require_receipt: bool = Field(alias="requireReceipt")


class Policy(_Body):
    """Exactly `{"protectChecks": bool}`: the owner's policy, apart from the spec's settings."""

    protect_checks: bool = Field(
        alias="protectChecks",
        description=(
            "In required mode, a reviewed commit that removes or changes a check canonical's "
            "head declares (its declaration or its quick module) is refused with "
            "checks-changed reasons until the owner accepts that change on approve."
        ),
    )


class CreateAgent(_Body):
    name: Name


class AddMember(_Body):
    agent_id: Id = Field(alias="agentId")


class CreateFork(_Body):
    name: Name


class CreatePacket(_Body):
    title: Title


class RequestReview(_Body):
    """No field selects a generation, image, authority, remote or digest."""

    packet_id: Id = Field(alias="packetId")
    fork_id: Id = Field(alias="forkId")
    commit: Sha
    follow_pushes: bool = Field(default=False, alias="followPushes")


class CommitBody(_Body):
    commit: Sha


class ApproveBody(CommitBody):
    """`acceptChecksChange: true` accepts the commit's removed or changed checks against
    canonical, when the protected-checks policy applies."""

    accept_checks_change: bool = Field(
        default=False,
        alias="acceptChecksChange",
        description=(
            "Accept the commit's removed or changed checks against canonical's head; the "
            "consent and the promotion's ledger entry record them as acceptedChecksChange."
        ),
    )
