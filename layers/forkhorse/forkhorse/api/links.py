"""OpenAPI links: how an answer's ids feed the next request.

They describe the API's flows (create a project, then read its state; request a review,
then read its receipt, approve and promote it) for readers of `/openapi.json` and for
stateful fuzzers, which follow them to build realistic call sequences. Targets are named
by `operationRef`, so the generated operation ids stay as they are.
"""

from __future__ import annotations

from typing import Any

Link = dict[str, Any]
Links = dict[str, Link]

PROJECT = "/projects/{project_id}"
REVIEW = f"{PROJECT}/reviews/{{review_id}}"
CLAIM = f"{PROJECT}/packets/{{packet_id}}/claim"

_SAME_PROJECT = "$request.path.project_id"
_SAME_REVIEW = "$request.path.review_id"


def _ref(method: str, path: str) -> str:
    pointer = path.replace("~", "~0").replace("/", "~1")
    return f"#/paths/{pointer}/{method}"


def link(method: str, path: str, body: Any = None, **parameters: str) -> Link:
    """A link to `method path`, filling its path parameters (and optionally its body)
    from runtime expressions."""
    found: Link = {"operationRef": _ref(method, path), "parameters": parameters}
    if body is not None:
        found["requestBody"] = body
    return found


def _project_links(project: str) -> Links:
    return {
        "ReadState": link("get", f"{PROJECT}/state", project_id=project),
        "ChangeSettings": link("patch", f"{PROJECT}/settings", project_id=project),
        "AddMember": link("post", f"{PROJECT}/members", project_id=project),
        "CreateFork": link("post", f"{PROJECT}/forks", project_id=project),
        "CreatePacket": link("post", f"{PROJECT}/packets", project_id=project),
    }


def _review_links(review: str, commit: str) -> Links:
    """What can be done with one review: read it, approve and promote its commit."""
    reads = {
        "ReadReceipt": "receipt",
        "ReadPromotion": "promotion",
        "ReadGate": "gate",
        "ReadHistory": "history",
        "ListReviewReceipts": "review-receipts",
    }
    links = {
        name: link("get", f"{REVIEW}/{leaf}", project_id=_SAME_PROJECT, review_id=review)
        for name, leaf in reads.items()
    }
    links["ReadReview"] = link("get", REVIEW, project_id=_SAME_PROJECT, review_id=review)
    for name, leaf in (("Approve", "approve"), ("Promote", "promote")):
        links[name] = link(
            "post",
            f"{REVIEW}/{leaf}",
            {"commit": commit},
            project_id=_SAME_PROJECT,
            review_id=review,
        )
    return links


def _state_link() -> Links:
    return {"ReadState": link("get", f"{PROJECT}/state", project_id=_SAME_PROJECT)}


def _packet_links(packet: str) -> Links:
    return {
        "Claim": link("post", CLAIM, project_id=_SAME_PROJECT, packet_id=packet),
        "Release": link("delete", CLAIM, project_id=_SAME_PROJECT, packet_id=packet),
    }


def created_project() -> Links:
    return _project_links("$response.body#/project/id")


def listed_projects() -> Links:
    first = "$response.body#/projects/0/id"
    return {
        "ReadState": link("get", f"{PROJECT}/state", project_id=first),
        "ListPackets": link("get", f"{PROJECT}/packets", project_id=first),
    }


def project_state() -> Links:
    """The state lists the project's forks, packets and reviews: the first of each feeds a
    review request, a claim and the review's own operations."""
    review_request = {
        "packetId": "$response.body#/packets/0/id",
        "forkId": "$response.body#/forks/0/id",
        "commit": "$response.body#/forks/0/head",
    }
    return {
        "RequestReview": link(
            "post", f"{PROJECT}/reviews", review_request, project_id=_SAME_PROJECT
        ),
        **_packet_links("$response.body#/packets/0/id"),
        **_review_links("$response.body#/reviews/0/id", "$response.body#/reviews/0/commit"),
        "ListReviews": link("get", f"{PROJECT}/reviews", project_id=_SAME_PROJECT),
        "OlderLedger": link(
            "get",
            f"{PROJECT}/ledger",
            project_id=_SAME_PROJECT,
            cursor="$response.body#/ledgerNext",
        ),
    }


def review_page() -> Links:
    """A page of reviews leads to the next page (its cursor) and to its first review."""
    return {
        "NextPage": link(
            "get", f"{PROJECT}/reviews", project_id=_SAME_PROJECT, cursor="$response.body#/next"
        ),
        **_review_links("$response.body#/reviews/0/id", "$response.body#/reviews/0/commit"),
    }


def ledger_page() -> Links:
    """A page of the ledger leads to the next page (its cursor)."""
    return {
        "NextPage": link(
            "get", f"{PROJECT}/ledger", project_id=_SAME_PROJECT, cursor="$response.body#/next"
        ),
    }


def created_agent() -> Links:
    return {"Revoke": link("delete", "/agents/{agent_id}", agent_id="$response.body#/agent/id")}


def created_packet() -> Links:
    return {**_packet_links("$response.body#/packet/id"), **_state_link()}


def in_project() -> Links:
    """After a change inside a project (settings, fork, member, claim): read its state."""
    return _state_link()


def requested_review() -> Links:
    return {
        **_review_links("$response.body#/review/id", "$response.body#/review/commit"),
        **_state_link(),
    }


def approved() -> Links:
    return {
        "Promote": link(
            "post",
            f"{REVIEW}/promote",
            {"commit": "$request.body#/commit"},
            project_id=_SAME_PROJECT,
            review_id=_SAME_REVIEW,
        ),
        **_state_link(),
    }


def promoted() -> Links:
    return {
        "ReadPromotion": link(
            "get", f"{REVIEW}/promotion", project_id=_SAME_PROJECT, review_id=_SAME_REVIEW
        ),
        **_state_link(),
    }


def done_promotion() -> Links:
    """A done promotion leads to its ledger entry and its signed VSA (as its `links` say)."""
    promotion = "$response.body#/promotion/id"
    return {
        **promoted(),
        "ReadLedgerEntry": link(
            "get",
            f"{PROJECT}/ledger/{{promotion_id}}",
            project_id=_SAME_PROJECT,
            promotion_id=promotion,
        ),
        "ReadAttestation": link(
            "get",
            f"{PROJECT}/promotions/{{promotion_id}}/attestation",
            project_id=_SAME_PROJECT,
            promotion_id=promotion,
        ),
    }


def packet_page() -> Links:
    """A page of packets leads to the next page (its cursor) and to claiming its first."""
    return {
        "NextPage": link(
            "get", f"{PROJECT}/packets", project_id=_SAME_PROJECT, cursor="$response.body#/next"
        ),
        **_packet_links("$response.body#/packets/0/id"),
    }
