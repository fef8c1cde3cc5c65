"""The AWS Store: one DynamoDB table (pk/sk strings), conditional writes and transactions.

Layout (pk / sk):
  PRINCIPALS / PRINCIPAL#<id>          principal, its kind and token hash
  TOKEN#<hash> / TOKEN                 token hash -> principal id
  PROJECTS / PROJECT#<id>              project (+ `settings`, absent on legacy projects; + `policy`)
  PROJECT#<p> / MEMBER#<agent>, FORK#<id>, PACKET#<id>, REVIEW#<created>#<id> (a pointer),
               PROMOTION#<id>, PROMOTION-FENCE, LEDGER#<promoted>#<promotion>, LEASE
  CLAIM#<packet> / CLAIM               the packet's claim (agentId, untilUs)
  REVIEW#<id> / REVIEW                 review + current execution (exec* attributes) + approval
  REVIEW#<id> / FLOW#<digest>          an attached Flow-Next review receipt
  REVIEW#<id> / PROMOTION-JOB          the review's latest requested promotion (its id)
  RUNNING / REVIEW#<id>                set of running executions, for restart recovery
  RECORD#<digest> / CHUNK#<n>, MANIFEST   immutable record chunks, manifest written last
  RECORD#<digest> / WRITING            an unfinished put's intent (see the records section)

Times are stored as integer microseconds since the epoch (`*Us` attributes), so
conditions compare them without the table's clock; none of them is the table's
TTL attribute, because a deleted lease would reset its fencing token.
"""

import json
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError
from pydantic import BaseModel

from forkhorse.domain.model import (
    OPEN_PROMOTION_STATES,
    Approval,
    Claim,
    Execution,
    Fork,
    InvalidatedExecution,
    Lease,
    LedgerEntry,
    Packet,
    Principal,
    Project,
    ProjectPolicy,
    ProjectSettings,
    Promotion,
    Refusal,
    Review,
    SettledState,
    check_settlement,
    fence_holds,
    is_current_running,
    may_request,
    may_settle,
    require_no_digest,
    settled,
    with_effective_settings,
)
from forkhorse.domain.receipts import ReceiptSummary, Trigger, interrupted_summary
from forkhorse.ports.store import RecordRemoval, StaleRecord

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

Item = dict[str, Any]
_BATCH_WRITE_LIMIT = 25
_BATCH_GET_LIMIT = 100
_CONDITION_FAILURES = frozenset({"ConditionalCheckFailedException", "TransactionCanceledException"})
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_PUT_ATTEMPTS = 3
# Items from before the collector carry no time: they count as written at the epoch.
_WRITTEN_BEFORE = "(attribute_not_exists(writtenAtUs) OR writtenAtUs < :cutoff)"


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def _us(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(microseconds=1)


def _key(pk: str, sk: str) -> Item:
    return {"pk": _s(pk), "sk": _s(sk)}


def _json(model: BaseModel) -> dict[str, str]:
    return _s(model.model_dump_json())


def _condition_failed(error: ClientError) -> bool:
    return error.response.get("Error", {}).get("Code") in _CONDITION_FAILURES


def _record_key(digest: str, sk: str) -> Item:
    return _key(f"RECORD#{digest}", sk)


def _review_key(review_id: str) -> Item:
    return _key(f"REVIEW#{review_id}", "REVIEW")


def _running_key(review_id: str) -> Item:
    return _key("RUNNING", f"REVIEW#{review_id}")


def _claim_key(packet_id: str) -> Item:
    return _key(f"CLAIM#{packet_id}", "CLAIM")


def _lease_key(project_id: str) -> Item:
    return _key(f"PROJECT#{project_id}", "LEASE")


def _fence_key(project_id: str) -> Item:
    return _key(f"PROJECT#{project_id}", "PROMOTION-FENCE")


def _promotion_job_key(review_id: str) -> Item:
    return _key(f"REVIEW#{review_id}", "PROMOTION-JOB")


# The review item's execution attributes, by the placeholder that `_execution_update` sets.
_EXECUTION_ITEM_NAMES = {
    ":execution": "execution",
    ":generation": "execGeneration",
    ":commit": "execCommit",
    ":trigger": "execTrigger",
    ":status": "execStatus",
    ":digest": "execDigest",
}


class DynamoDbStore:
    def __init__(self, client: "DynamoDBClient", table_name: str) -> None:
        self._client = client
        self._table = table_name

    def close(self) -> None:
        """Nothing to release: the boto3 client is owned by the caller."""

    # --- low-level helpers ---------------------------------------------------------
    def _get(self, key: Item) -> Item | None:
        response = self._client.get_item(TableName=self._table, Key=key, ConsistentRead=True)
        return response.get("Item")

    def _query(self, pk: str, sk_prefix: str, **projection: Any) -> Iterator[Item]:
        paginator = self._client.get_paginator("query")
        pages = paginator.paginate(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": _s(pk), ":prefix": _s(sk_prefix)},
            ConsistentRead=True,
            **projection,
        )
        for page in pages:
            yield from page.get("Items", [])

    def _conditional(self, action: str, **request: Any) -> bool:
        """Run one conditional write or transaction; False when its condition failed."""
        try:
            getattr(self._client, action)(**request)
        except ClientError as error:
            if _condition_failed(error):
                return False
            raise
        return True

    def _put_new(self, item: Item) -> bool:
        return self._conditional(
            "put_item",
            TableName=self._table,
            Item=item,
            ConditionExpression="attribute_not_exists(pk)",
        )

    def _transact(self, *operations: Item) -> bool:
        return self._conditional("transact_write_items", TransactItems=list(operations))

    def _data(self, pk: str, sk: str) -> str | None:
        item = self._get(_key(pk, sk))
        return None if item is None else str(item["data"]["S"])

    def _all_data(self, pk: str, sk_prefix: str) -> list[str]:
        return [str(item["data"]["S"]) for item in self._query(pk, sk_prefix)]

    # --- principals ----------------------------------------------------------------
    def create_principal(self, principal: Principal, token_hash: str) -> bool:
        record = {
            **_key("PRINCIPALS", f"PRINCIPAL#{principal.id}"),
            "kind": _s(principal.kind),
            "tokenHash": _s(token_hash),
            "data": _json(principal),
        }
        token = {**_key(f"TOKEN#{token_hash}", "TOKEN"), "principalId": _s(principal.id)}
        return self._transact(self._put_if_new(record), self._put_if_new(token))

    def _put_if_new(self, item: Item) -> Item:
        return {
            "Put": {
                "TableName": self._table,
                "Item": item,
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def _principal_item(self, principal_id: str) -> Item | None:
        return self._get(_key("PRINCIPALS", f"PRINCIPAL#{principal_id}"))

    def get_principal(self, principal_id: str) -> Principal | None:
        item = self._principal_item(principal_id)
        return None if item is None else Principal.model_validate_json(item["data"]["S"])

    def list_agents(self) -> list[Principal]:
        principals = [
            Principal.model_validate_json(data)
            for data in self._all_data("PRINCIPALS", "PRINCIPAL#")
        ]
        return [principal for principal in principals if principal.kind == "agent"]

    def find_principal_by_token_hash(self, token_hash: str) -> Principal | None:
        token = self._get(_key(f"TOKEN#{token_hash}", "TOKEN"))
        principal = None if token is None else self.get_principal(token["principalId"]["S"])
        return None if principal is None or principal.revoked else principal

    def revoke_principal(self, principal_id: str) -> bool:
        item = self._principal_item(principal_id)
        if item is None:
            return False
        principal = Principal.model_validate_json(item["data"]["S"])
        revoked = principal.model_copy(update={"revoked": True})
        token_key = _key(f"TOKEN#{item['tokenHash']['S']}", "TOKEN")
        update = {
            "Update": {
                "TableName": self._table,
                "Key": _key("PRINCIPALS", f"PRINCIPAL#{principal_id}"),
                "UpdateExpression": "SET #data = :data",
                "ExpressionAttributeNames": {"#data": "data"},
                "ExpressionAttributeValues": {":data": _json(revoked)},
            }
        }
        return self._transact(update, {"Delete": {"TableName": self._table, "Key": token_key}})

    # --- projects, members, forks, packets --------------------------------------------
    def create_project(self, project: Project) -> bool:
        item = {
            **_key("PROJECTS", f"PROJECT#{project.id}"),
            "data": _s(project.model_dump_json(exclude={"settings", "policy"})),
            "policy": _json(project.policy),
        }
        if project.settings is not None:
            item["settings"] = _json(project.settings)
        return self._put_new(item)

    @staticmethod
    def _project_from(item: Item) -> Project:
        project = Project.model_validate_json(item["data"]["S"])
        if "settings" in item:
            settings = ProjectSettings.model_validate_json(item["settings"]["S"])
            project = project.model_copy(update={"settings": settings})
        if "policy" in item:
            policy = ProjectPolicy.model_validate_json(item["policy"]["S"])
            project = project.model_copy(update={"policy": policy})
        return with_effective_settings(project)

    def get_project(self, project_id: str) -> Project | None:
        item = self._get(_key("PROJECTS", f"PROJECT#{project_id}"))
        return None if item is None else self._project_from(item)

    def list_projects(self) -> list[Project]:
        return [self._project_from(item) for item in self._query("PROJECTS", "PROJECT#")]

    def set_settings(self, project_id: str, settings: ProjectSettings) -> bool:
        return self._set_project_attribute(project_id, "settings", settings)

    def set_policy(self, project_id: str, policy: ProjectPolicy) -> bool:
        return self._set_project_attribute(project_id, "policy", policy)

    def _set_project_attribute(self, project_id: str, name: str, value: BaseModel) -> bool:
        """Settings and policy are attributes of their own, so each changes alone."""
        return self._conditional(
            "update_item",
            TableName=self._table,
            Key=_key("PROJECTS", f"PROJECT#{project_id}"),
            UpdateExpression=f"SET {name} = :value",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={":value": _json(value)},
        )

    def add_member(self, project_id: str, agent_id: str) -> None:
        item = {**_key(f"PROJECT#{project_id}", f"MEMBER#{agent_id}"), "agentId": _s(agent_id)}
        self._client.put_item(TableName=self._table, Item=item)

    def is_member(self, project_id: str, agent_id: str) -> bool:
        return self._get(_key(f"PROJECT#{project_id}", f"MEMBER#{agent_id}")) is not None

    def list_members(self, project_id: str) -> list[str]:
        items = self._query(f"PROJECT#{project_id}", "MEMBER#")
        return [str(item["agentId"]["S"]) for item in items]

    def create_fork(self, fork: Fork) -> bool:
        return self._put_new(
            {**_key(f"PROJECT#{fork.project_id}", f"FORK#{fork.id}"), "data": _json(fork)}
        )

    def get_fork(self, project_id: str, fork_id: str) -> Fork | None:
        data = self._data(f"PROJECT#{project_id}", f"FORK#{fork_id}")
        return None if data is None else Fork.model_validate_json(data)

    def list_forks(self, project_id: str) -> list[Fork]:
        return [
            Fork.model_validate_json(d) for d in self._all_data(f"PROJECT#{project_id}", "FORK#")
        ]

    def create_packet(self, packet: Packet) -> bool:
        return self._put_new(
            {**_key(f"PROJECT#{packet.project_id}", f"PACKET#{packet.id}"), "data": _json(packet)}
        )

    def get_packet(self, project_id: str, packet_id: str) -> Packet | None:
        data = self._data(f"PROJECT#{project_id}", f"PACKET#{packet_id}")
        return None if data is None else Packet.model_validate_json(data)

    def list_packets(self, project_id: str) -> list[Packet]:
        rows = self._all_data(f"PROJECT#{project_id}", "PACKET#")
        return [Packet.model_validate_json(data) for data in rows]

    # --- claims --------------------------------------------------------------------
    def claim_packet(
        self, packet_id: str, agent_id: str, ttl: timedelta, now: datetime
    ) -> Claim | None:
        claim = Claim(packet_id=packet_id, agent_id=agent_id, claimed_at=now, expires_at=now + ttl)
        claimed = self._conditional(
            "put_item",
            TableName=self._table,
            Item={
                **_claim_key(packet_id),
                "agentId": _s(agent_id),
                "untilUs": _n(_us(claim.expires_at)),
                "data": _json(claim),
            },
            ConditionExpression="attribute_not_exists(pk) OR agentId = :agent OR untilUs <= :now",
            ExpressionAttributeValues={":agent": _s(agent_id), ":now": _n(_us(now))},
        )
        return claim if claimed else None

    def release_claim(self, packet_id: str, agent_id: str) -> bool:
        return self._conditional(
            "delete_item",
            TableName=self._table,
            Key=_claim_key(packet_id),
            ConditionExpression="agentId = :agent",
            ExpressionAttributeValues={":agent": _s(agent_id)},
        )

    def live_claim(self, packet_id: str, now: datetime) -> Claim | None:
        item = self._get(_claim_key(packet_id))
        claim = None if item is None else Claim.model_validate_json(item["data"]["S"])
        return claim if claim is not None and claim.is_live(now) else None

    # --- reviews -------------------------------------------------------------------
    @staticmethod
    def _execution_attributes(execution: Execution) -> dict[str, Item]:
        values = {
            ":execution": _json(execution),
            ":generation": _s(execution.generation),
            ":commit": _s(execution.commit),
            ":trigger": _s(execution.trigger),
            ":status": _s(execution.summary.status),
        }
        if execution.digest is not None:
            values[":digest"] = _s(execution.digest)
        return values

    @staticmethod
    def _execution_update(execution: Execution) -> str:
        assignments = (
            "SET execution = :execution, execGeneration = :generation, execCommit = :commit,"
            " execTrigger = :trigger, execStatus = :status"
        )
        if execution.digest is not None:
            return f"{assignments}, execDigest = :digest"
        return f"{assignments} REMOVE execDigest"

    def _running_marker(self, review_id: str, execution: Execution) -> Item:
        """Keep the RUNNING set in step with the execution's status."""
        if execution.is_running:
            item = {**_running_key(review_id), "generation": _s(execution.generation)}
            return {"Put": {"TableName": self._table, "Item": item}}
        return {"Delete": {"TableName": self._table, "Key": _running_key(review_id)}}

    def _write_execution(
        self, review_id: str, execution: Execution, condition: str, values: Item
    ) -> bool:
        update = {
            "Update": {
                "TableName": self._table,
                "Key": _review_key(review_id),
                "UpdateExpression": self._execution_update(execution),
                "ConditionExpression": condition,
                "ExpressionAttributeValues": {**self._execution_attributes(execution), **values},
            }
        }
        return self._transact(update, self._running_marker(review_id, execution))

    def create_review(self, review: Review) -> bool:
        created = _us(review.created_at)
        item: Item = {
            **_review_key(review.id),
            "data": _s(review.model_dump_json(exclude={"execution", "approval"})),
            "reviewCommit": _s(review.commit),
        }
        operations = [
            self._put_if_new(item),
            self._put_if_new(
                {
                    **_key(f"PROJECT#{review.project_id}", f"REVIEW#{created:020d}#{review.id}"),
                    "reviewId": _s(review.id),
                }
            ),
        ]
        if review.approval is not None:
            item["approval"] = _json(review.approval)
        if review.execution is not None:
            item.update(
                {
                    _EXECUTION_ITEM_NAMES[name]: value
                    for name, value in self._execution_attributes(review.execution).items()
                }
            )
            operations.append(self._running_marker(review.id, review.execution))
        return self._transact(*operations)

    @staticmethod
    def _review_from(item: Item) -> Review:
        data = json.loads(item["data"]["S"])
        for mutable in ("execution", "approval"):
            if mutable in item:
                data[mutable] = json.loads(item[mutable]["S"])
        return Review.model_validate(data)

    def get_review(self, review_id: str) -> Review | None:
        item = self._get(_review_key(review_id))
        return None if item is None else self._review_from(item)

    def list_reviews(self, project_id: str) -> list[Review]:
        ids = [
            str(item["reviewId"]["S"]) for item in self._query(f"PROJECT#{project_id}", "REVIEW#")
        ]
        found: dict[str, Review] = {}
        for start in range(0, len(ids), _BATCH_GET_LIMIT):
            for item in self._batch_get(
                [_review_key(i) for i in ids[start : start + _BATCH_GET_LIMIT]]
            ):
                review = self._review_from(item)
                found[review.id] = review
        return [found[review_id] for review_id in ids if review_id in found]

    def _batch_get(self, keys: list[Item]) -> Iterator[Item]:
        request: Any = {self._table: {"Keys": keys, "ConsistentRead": True}}
        while request:
            response = self._client.batch_get_item(RequestItems=request)
            yield from response.get("Responses", {}).get(self._table, [])
            request = response.get("UnprocessedKeys") or None

    def start_execution(
        self,
        review_id: str,
        commit: str,
        trigger: Trigger,
        generation: str,
        summary: ReceiptSummary,
    ) -> bool:
        execution = Execution(
            generation=generation,
            commit=commit,
            trigger=trigger,
            summary=summary.model_copy(update={"digest": None}),
        )
        return self._write_execution(review_id, execution, "attribute_exists(pk)", {})

    def retarget_review(
        self,
        review_id: str,
        expected_commit: str,
        commit: str,
        generation: str,
        summary: ReceiptSummary,
    ) -> bool:
        review = self.get_review(review_id)
        if review is None or review.commit != expected_commit:
            return False
        execution = Execution(
            generation=generation,
            commit=commit,
            trigger="review-created",
            summary=summary.model_copy(update={"digest": None}),
        )
        moved = review.model_copy(update={"commit": commit})
        update = {
            "Update": {
                "TableName": self._table,
                "Key": _review_key(review_id),
                # A fresh execution has no digest, so its update ends in "REMOVE execDigest".
                "UpdateExpression": self._execution_update(execution).replace(
                    "SET ", "SET reviewCommit = :newCommit, #data = :data, ", 1
                )
                + ", approval",
                "ConditionExpression": "reviewCommit = :oldCommit",
                "ExpressionAttributeNames": {"#data": "data"},
                "ExpressionAttributeValues": {
                    **self._execution_attributes(execution),
                    ":newCommit": _s(commit),
                    ":oldCommit": _s(expected_commit),
                    ":data": _s(moved.model_dump_json(exclude={"execution", "approval"})),
                },
            }
        }
        return self._transact(update, self._running_marker(review_id, execution))

    def update_summary(self, review_id: str, generation: str, summary: ReceiptSummary) -> bool:
        require_no_digest(summary)
        review = self.get_review(review_id)
        execution = None if review is None else review.execution
        if execution is None or not is_current_running(execution, generation):
            return False
        return self._write_execution(
            review_id,
            execution.model_copy(update={"summary": summary}),
            "execGeneration = :generation AND execStatus = :running",
            {":running": _s("running")},
        )

    def discard_execution(self, review_id: str, generation: str) -> bool:
        discard = {
            "Update": {
                "TableName": self._table,
                "Key": _review_key(review_id),
                "UpdateExpression": (
                    "REMOVE execution, execGeneration, execCommit, execTrigger, execStatus,"
                    " execDigest"
                ),
                "ConditionExpression": "execGeneration = :generation AND execStatus = :running",
                "ExpressionAttributeValues": {
                    ":generation": _s(generation),
                    ":running": _s("running"),
                },
            }
        }
        unmark = {"Delete": {"TableName": self._table, "Key": _running_key(review_id)}}
        return self._transact(discard, unmark)

    def attach(
        self,
        review_id: str,
        commit: str,
        generation: str,
        trigger: Trigger,
        digest: str,
        summary: ReceiptSummary,
        now: datetime,
    ) -> bool:
        review = self.get_review(review_id)  # only its immutable packet and agent are used
        if review is None:
            return False
        execution = Execution(
            generation=generation,
            commit=commit,
            trigger=trigger,
            summary=summary.model_copy(update={"digest": digest}),
        )
        claim_check = {
            "ConditionCheck": {
                "TableName": self._table,
                "Key": _claim_key(review.packet_id),
                "ConditionExpression": "agentId = :agent AND untilUs > :now",
                "ExpressionAttributeValues": {
                    ":agent": _s(review.agent_id),
                    ":now": _n(_us(now)),
                },
            }
        }
        update = {
            "Update": {
                "TableName": self._table,
                "Key": _review_key(review_id),
                "UpdateExpression": self._execution_update(execution),
                "ConditionExpression": (
                    "execGeneration = :generation AND execCommit = :commit"
                    " AND execTrigger = :trigger AND execStatus = :running"
                ),
                "ExpressionAttributeValues": {
                    **self._execution_attributes(execution),
                    ":running": _s("running"),
                },
            }
        }
        return self._transact(claim_check, update, self._running_marker(review_id, execution))

    def invalidate_running(self, now: datetime) -> list[InvalidatedExecution]:
        invalidated: list[InvalidatedExecution] = []
        for marker in list(self._query("RUNNING", "REVIEW#")):
            review_id = marker["sk"]["S"].removeprefix("REVIEW#")
            review = self.get_review(review_id)
            execution = None if review is None else review.execution
            generation = marker["generation"]["S"]
            if review is None or execution is None or not is_current_running(execution, generation):
                self._client.delete_item(TableName=self._table, Key=_running_key(review_id))
                continue
            failed = execution.model_copy(
                update={"summary": interrupted_summary(execution.summary, now)}
            )
            if self._write_execution(
                review_id,
                failed,
                "execGeneration = :generation AND execStatus = :running",
                {":running": _s("running")},
            ):
                invalidated.append(
                    InvalidatedExecution(
                        review_id=review_id, project_id=review.project_id, generation=generation
                    )
                )
        return invalidated

    def approve(
        self,
        review_id: str,
        approval: Approval,
        expected_digest: str | None,
        expected_generation: str | None,
        *,
        compare_receipt: bool = True,
    ) -> bool:
        values: Item = {":approval": _json(approval), ":commit": _s(approval.commit)}
        conditions = ["reviewCommit = :commit"]
        compared = (
            (("execGeneration", expected_generation, ":generation"),
             ("execDigest", expected_digest, ":digest"))
            if compare_receipt
            else ()
        )  # fmt: skip
        for attribute, expected, name in compared:
            if expected is None:
                conditions.append(f"attribute_not_exists({attribute})")
            else:
                conditions.append(f"{attribute} = {name}")
                values[name] = _s(expected)
        return self._conditional(
            "update_item",
            TableName=self._table,
            Key=_review_key(review_id),
            UpdateExpression="SET approval = :approval",
            ConditionExpression=" AND ".join(conditions),
            ExpressionAttributeValues=values,
        )

    # --- promotions and the ledger --------------------------------------------------
    def _promotion_key(self, project_id: str, promotion_id: str) -> Item:
        return _key(f"PROJECT#{project_id}", f"PROMOTION#{promotion_id}")

    def _fence_check(self, project_id: str, token: int, now: datetime) -> Item:
        return {
            "ConditionCheck": {
                "TableName": self._table,
                "Key": _lease_key(project_id),
                "ConditionExpression": "#token = :token AND untilUs > :now",
                "ExpressionAttributeNames": {"#token": "token"},
                "ExpressionAttributeValues": {":token": _n(token), ":now": _n(_us(now))},
            }
        }

    def _promotion_put(self, promotion: Promotion, condition: str, values: Item) -> Item:
        return {
            "Put": {
                "TableName": self._table,
                "Item": {
                    **self._promotion_key(promotion.project_id, promotion.id),
                    "state": _s(promotion.state),
                    "data": _json(promotion),
                },
                "ConditionExpression": condition,
                # DynamoDB refuses names and values the condition does not use.
                **({"ExpressionAttributeNames": {"#state": "state"}} if values else {}),
                **({"ExpressionAttributeValues": values} if values else {}),
            }
        }

    def _state_check(self, promotion: Promotion) -> Item:
        """The promotion is still in the state it was read in."""
        return {
            "ConditionCheck": {
                "TableName": self._table,
                "Key": self._promotion_key(promotion.project_id, promotion.id),
                "ConditionExpression": "#state = :seen",
                "ExpressionAttributeNames": {"#state": "state"},
                "ExpressionAttributeValues": {":seen": _s(promotion.state)},
            }
        }

    def request_promotion(self, promotion: Promotion, now: datetime) -> bool:
        queued = promotion.model_copy(update={"state": "queued", "settled_at": None})
        # The review's job marker names its latest requested promotion; optimistic, like
        # the lease: the marker and that promotion's state must not change since read.
        marker = self._get(_promotion_job_key(promotion.review_id))
        latest = None
        if marker is not None:
            latest = self.get_promotion(promotion.project_id, marker["promotionId"]["S"])
        if latest is not None and (latest.id == promotion.id or not may_request([latest], now)):
            return False
        job = {**_promotion_job_key(promotion.review_id), "promotionId": _s(promotion.id)}
        if marker is None:
            claim_marker = self._put_if_new(job)
        else:
            claim_marker = {
                "Put": {
                    "TableName": self._table,
                    "Item": job,
                    "ConditionExpression": "promotionId = :seen",
                    "ExpressionAttributeValues": {":seen": marker["promotionId"]},
                }
            }
        operations = [claim_marker, self._promotion_put(queued, "attribute_not_exists(pk)", {})]
        if latest is not None:
            operations.append(self._state_check(latest))
        return self._transact(*operations)

    def begin_promotion(self, promotion: Promotion, fencing_token: int, now: datetime) -> bool:
        pending = promotion.model_copy(update={"state": "pending", "settled_at": None})
        project = promotion.project_id
        fence = {**_fence_key(project), "promotionId": _s(promotion.id)}
        return self._transact(
            self._fence_check(project, fencing_token, now),
            self._put_if_new(fence),
            self._promotion_put(
                pending, "attribute_not_exists(pk) OR #state = :queued", {":queued": _s("queued")}
            ),
        )

    def arm_promotion(
        self,
        project_id: str,
        promotion_id: str,
        digest: str | None,
        fencing_token: int,
        now: datetime,
    ) -> bool:
        promotion = self.get_promotion(project_id, promotion_id)
        if promotion is None or promotion.state != "pending":
            return False
        writing = promotion.model_copy(update={"state": "writing", "digest": digest})
        return self._transact(
            self._fence_check(project_id, fencing_token, now),
            self._promotion_put(writing, "#state = :pending", {":pending": _s("pending")}),
        )

    def settle_promotion(
        self,
        project_id: str,
        promotion_id: str,
        state: SettledState,
        ledger_entry: LedgerEntry | None,
        now: datetime,
        refusal: Refusal | None = None,
    ) -> bool:
        check_settlement(state, ledger_entry, refusal)
        promotion = self.get_promotion(project_id, promotion_id)
        if promotion is None or not may_settle(promotion, state):
            return False
        operations: list[Item] = [
            self._promotion_put(
                settled(promotion, state, now, refusal),
                "#state = :from",
                {":from": _s(promotion.state)},
            )
        ]
        if promotion.state in OPEN_PROMOTION_STATES and state != "uncertain":
            operations.append(
                {
                    "Delete": {
                        "TableName": self._table,
                        "Key": _fence_key(project_id),
                        "ConditionExpression": "promotionId = :id",
                        "ExpressionAttributeValues": {":id": _s(promotion_id)},
                    }
                }
            )
        if ledger_entry is not None:
            sk = f"LEDGER#{_us(ledger_entry.promoted_at):020d}#{promotion_id}"
            operations.append(
                self._put_if_new({**_key(f"PROJECT#{project_id}", sk), "data": _json(ledger_entry)})
            )
        return self._transact(*operations)

    def get_promotion(self, project_id: str, promotion_id: str) -> Promotion | None:
        data = self._data(f"PROJECT#{project_id}", f"PROMOTION#{promotion_id}")
        return None if data is None else Promotion.model_validate_json(data)

    def list_promotions(self, project_id: str) -> list[Promotion]:
        rows = self._all_data(f"PROJECT#{project_id}", "PROMOTION#")
        promotions = [Promotion.model_validate_json(data) for data in rows]
        return sorted(promotions, key=lambda promotion: promotion.started_at)

    def open_promotion(self, project_id: str) -> Promotion | None:
        fence = self._get(_fence_key(project_id))
        if fence is None:
            return None
        return self.get_promotion(project_id, fence["promotionId"]["S"])

    def ledger(self, project_id: str) -> list[LedgerEntry]:
        rows = self._all_data(f"PROJECT#{project_id}", "LEDGER#")
        return [LedgerEntry.model_validate_json(data) for data in rows]

    # --- the workflow lease ----------------------------------------------------------
    def _lease(self, project_id: str) -> Lease | None:
        item = self._get(_lease_key(project_id))
        return None if item is None else Lease.model_validate_json(item["data"]["S"])

    def _put_lease(self, lease: Lease, condition: str, values: Item) -> bool:
        return self._conditional(
            "put_item",
            TableName=self._table,
            Item={
                **_lease_key(lease.project_id),
                "holder": _s(lease.holder),
                "token": _n(lease.token),
                "untilUs": _n(_us(lease.expires_at)),
                "data": _json(lease),
            },
            ConditionExpression=condition,
            ExpressionAttributeNames={"#token": "token"},
            ExpressionAttributeValues=values,
        )

    def acquire_lease(
        self, project_id: str, holder: str, ttl: timedelta, now: datetime
    ) -> int | None:
        held = self._lease(project_id)
        if held is not None and held.is_live(now) and held.holder != holder:
            return None
        token = 1 if held is None else held.token + 1
        lease = Lease(project_id=project_id, holder=holder, token=token, expires_at=now + ttl)
        # Optimistic: only if nobody changed the lease since it was read.
        if held is None:
            condition, values = "attribute_not_exists(pk) OR #token = :none", {":none": _n(0)}
        else:
            condition, values = "#token = :seen", {":seen": _n(held.token)}
        return token if self._put_lease(lease, condition, values) else None

    def _update_lease(self, lease: Lease, holder: str, token: int, live_at: datetime) -> bool:
        return self._put_lease(
            lease,
            "holder = :holder AND #token = :token AND untilUs > :now",
            {":holder": _s(holder), ":token": _n(token), ":now": _n(_us(live_at))},
        )

    def renew_lease(
        self, project_id: str, holder: str, token: int, ttl: timedelta, now: datetime
    ) -> bool:
        held = self._lease(project_id)
        if held is None or held.holder != holder or not fence_holds(held, token, now):
            return False
        return self._update_lease(
            held.model_copy(update={"expires_at": now + ttl}), holder, token, now
        )

    def release_lease(self, project_id: str, holder: str, token: int) -> bool:
        held = self._lease(project_id)
        if held is None or (held.holder, held.token) != (holder, token):
            return False
        # Keep the item (expired) so the next token still grows.
        released = held.model_copy(update={"expires_at": _EPOCH})
        return self._update_lease(released, holder, token, _EPOCH)

    def check_fence(self, project_id: str, token: int, now: datetime) -> bool:
        return fence_holds(self._lease(project_id), token, now)

    # --- records -------------------------------------------------------------------
    # A put first writes an intent (WRITING, with a token), then the chunks, then the
    # manifest in one transaction that also consumes its own intent. A collection deletes
    # a stale intent before any chunk, and each chunk only while no manifest and no intent
    # exists: so a put whose chunks were collected loses its intent and starts over, and
    # a manifest never appears over a missing chunk, however large the record.
    def _record_manifest(self, digest: str) -> Item | None:
        return self._get(_record_key(digest, "MANIFEST"))

    def _touch_manifest(self, digest: str, written: int) -> bool:
        return self._conditional(
            "update_item",
            TableName=self._table,
            Key=_record_key(digest, "MANIFEST"),
            UpdateExpression="SET writtenAtUs = :written",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={":written": _n(written)},
        )

    def _put_intent(self, digest: str, token: str, written: int) -> None:
        item = {**_record_key(digest, "WRITING"), "token": _s(token), "writtenAtUs": _n(written)}
        self._client.put_item(TableName=self._table, Item=item)

    def _write_chunks(self, digest: str, chunks: Sequence[str], written: int) -> None:
        puts = [
            {
                "PutRequest": {
                    "Item": {
                        **_record_key(digest, f"CHUNK#{index:06d}"),
                        "text": _s(chunk),
                        "writtenAtUs": _n(written),
                    }
                }
            }
            for index, chunk in enumerate(chunks)
        ]
        for start in range(0, len(puts), _BATCH_WRITE_LIMIT):
            request: Any = {self._table: puts[start : start + _BATCH_WRITE_LIMIT]}
            while request:
                response = self._client.batch_write_item(RequestItems=request)
                request = response.get("UnprocessedItems") or None

    def _write_manifest(self, digest: str, chunk_count: int, written: int, token: str) -> bool:
        manifest = {
            **_record_key(digest, "MANIFEST"),
            "chunkCount": _n(chunk_count),
            "writtenAtUs": _n(written),
        }
        consume_intent = {
            "Delete": {
                "TableName": self._table,
                "Key": _record_key(digest, "WRITING"),
                "ConditionExpression": "#token = :token",
                "ExpressionAttributeNames": {"#token": "token"},
                "ExpressionAttributeValues": {":token": _s(token)},
            }
        }
        return self._transact(consume_intent, self._put_if_new(manifest))

    def put_record_chunks(self, digest: str, chunks: Sequence[str], now: datetime) -> None:
        written = _us(now)
        for _ in range(_PUT_ATTEMPTS):
            if self._touch_manifest(digest, written):
                return  # content-addressed: the stored record is already these bytes
            token = uuid.uuid4().hex
            self._put_intent(digest, token, written)
            self._write_chunks(digest, chunks, written)
            if self._write_manifest(digest, len(chunks), written, token):
                return
        raise RuntimeError(f"record {digest} lost its intent {_PUT_ATTEMPTS} times in a row")

    def get_record_chunks(self, digest: str) -> list[str] | None:
        manifest = self._record_manifest(digest)
        if manifest is None:
            return None
        count = int(manifest["chunkCount"]["N"])
        chunks = [str(item["text"]["S"]) for item in self._query(f"RECORD#{digest}", "CHUNK#")]
        return chunks[:count]

    def stale_records(self, written_before: datetime) -> Iterator[StaleRecord]:
        # A scan is fine for a periodic sweep; a partition's items come together, so one
        # digest is yielded once unless a page boundary splits it (deletion is idempotent).
        paginator = self._client.get_paginator("scan")
        pages = paginator.paginate(
            TableName=self._table,
            FilterExpression=f"begins_with(pk, :record) AND {_WRITTEN_BEFORE}",
            ExpressionAttributeValues={
                ":record": _s("RECORD#"),
                ":cutoff": _n(_us(written_before)),
            },
            ProjectionExpression="pk",
        )
        previous = None
        for page in pages:
            for item in page.get("Items", []):
                digest = str(item["pk"]["S"]).removeprefix("RECORD#")
                if digest != previous:
                    previous = digest
                    yield StaleRecord(digest, self._record_manifest(digest) is not None)

    def delete_stale_record(self, digest: str, written_before: datetime) -> RecordRemoval:
        stale = {":cutoff": _n(_us(written_before))}
        manifest = self._conditional(
            "delete_item",
            TableName=self._table,
            Key=_record_key(digest, "MANIFEST"),
            ConditionExpression=f"attribute_exists(pk) AND {_WRITTEN_BEFORE}",
            ExpressionAttributeValues=stale,
        )
        if not manifest and self._record_manifest(digest) is not None:
            return RecordRemoval(manifest=False, chunks=0)  # written again since
        if not self._conditional(
            "delete_item",
            TableName=self._table,
            Key=_record_key(digest, "WRITING"),
            ConditionExpression=f"attribute_not_exists(pk) OR {_WRITTEN_BEFORE}",
            ExpressionAttributeValues=stale,
        ):
            return RecordRemoval(manifest=manifest, chunks=0)  # a put is in progress
        return RecordRemoval(manifest=manifest, chunks=self._delete_stale_chunks(digest, stale))

    def _delete_stale_chunks(self, digest: str, stale: Item) -> int:
        deleted = 0
        for item in self._query(f"RECORD#{digest}", "CHUNK#", ProjectionExpression="sk"):
            if not self._transact(
                self._absent(_record_key(digest, "MANIFEST")),
                self._absent(_record_key(digest, "WRITING")),
                {
                    "Delete": {
                        "TableName": self._table,
                        "Key": _record_key(digest, str(item["sk"]["S"])),
                        "ConditionExpression": _WRITTEN_BEFORE,
                        "ExpressionAttributeValues": stale,
                    }
                },
            ):
                break  # a put started (or rewrote this chunk): leave the rest to it
            deleted += 1
        return deleted

    def _absent(self, key: Item) -> Item:
        return {
            "ConditionCheck": {
                "TableName": self._table,
                "Key": key,
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    # --- Flow-Next review receipts ----------------------------------------------------
    def put_review_receipt(self, review_id: str, digest: str) -> None:
        item = {**_key(f"REVIEW#{review_id}", f"FLOW#{digest}"), "digest": _s(digest)}
        self._client.put_item(TableName=self._table, Item=item)

    def list_review_receipts(self, review_id: str) -> list[str]:
        return [str(item["digest"]["S"]) for item in self._query(f"REVIEW#{review_id}", "FLOW#")]
