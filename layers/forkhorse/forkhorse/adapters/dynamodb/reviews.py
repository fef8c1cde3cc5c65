"""Reviews (the current execution as exec* attributes) and Flow-Next receipts in DynamoDB."""

import json
from datetime import datetime
from typing import Any

from forkhorse.adapters.dynamodb.leases import claim_key
from forkhorse.adapters.dynamodb.table import (
    DynamoDbTable,
    Item,
    item_key,
    json_attr,
    num_attr,
    str_attr,
    to_micros,
)
from forkhorse.domain.model import (
    Approval,
    Execution,
    InvalidatedExecution,
    Review,
    is_current_running,
    require_no_digest,
    started_execution,
)
from forkhorse.domain.receipts import ReceiptSummary, Trigger, interrupted_summary

_LATEST_RACE_RETRIES = 3


def _review_key(review_id: str) -> Item:
    return item_key(f"REVIEW#{review_id}", "REVIEW")


def _history_pk(project_id: str) -> str:
    """The project's review history: a partition of its own, so that reading the project
    (its forks, packets, ledger, lease and active reviews) never reads past its history."""
    return f"REVIEWS#{project_id}"


def _history_sk(created_us: int, review_id: str) -> str:
    """The review's place in its project's history (newest last)."""
    return f"REVIEW#{created_us:020d}#{review_id}"


def _latest_key(review: Review) -> Item:
    """The pointer to the newest review of a packet from a fork: the project's active set."""
    return item_key(f"PROJECT#{review.project_id}", f"LATEST#{review.fork_id}#{review.packet_id}")


def _running_key(review_id: str) -> Item:
    return item_key("RUNNING", f"REVIEW#{review_id}")


# The review item's execution attributes, by the placeholder that `_execution_update` sets.
_EXECUTION_ITEM_NAMES = {
    ":execution": "execution",
    ":generation": "execGeneration",
    ":commit": "execCommit",
    ":trigger": "execTrigger",
    ":status": "execStatus",
    ":digest": "execDigest",
}


class DynamoDbReviews(DynamoDbTable):
    @staticmethod
    def _execution_attributes(execution: Execution) -> dict[str, Item]:
        values = {
            ":execution": json_attr(execution),
            ":generation": str_attr(execution.generation),
            ":commit": str_attr(execution.commit),
            ":trigger": str_attr(execution.trigger),
            ":status": str_attr(execution.summary.status),
        }
        if execution.digest is not None:
            values[":digest"] = str_attr(execution.digest)
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
            item = {**_running_key(review_id), "generation": str_attr(execution.generation)}
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
        """The review, its place in the project's history, and its fork and packet's latest
        pointer (the active set), compared with the pointer read just before: a concurrent
        review of the same packet from the same fork makes us read it again."""
        for _ in range(_LATEST_RACE_RETRIES):
            if self._create_review(review):
                return True
            if self._get(_review_key(review.id)) is not None:
                return False
        return False

    def _create_review(self, review: Review) -> bool:
        created = to_micros(review.created_at)
        item: Item = {
            **_review_key(review.id),
            "data": str_attr(review.model_dump_json(exclude={"execution", "approval"})),
            "reviewCommit": str_attr(review.commit),
        }
        operations = [
            self._put_if_new(item),
            self._put_if_new(
                {
                    **item_key(_history_pk(review.project_id), _history_sk(created, review.id)),
                    "reviewId": str_attr(review.id),
                }
            ),
            self._replace_latest(review, created),
        ]
        if review.approval is not None:
            item["approval"] = json_attr(review.approval)
        if review.execution is not None:
            item.update(
                {
                    _EXECUTION_ITEM_NAMES[name]: value
                    for name, value in self._execution_attributes(review.execution).items()
                }
            )
            operations.append(self._running_marker(review.id, review.execution))
        return self._transact(*operations)

    def _replace_latest(self, review: Review, created: int) -> Item:
        key = _latest_key(review)
        previous = self._get(key)
        condition: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(pk)"}
        if previous is not None:
            condition = {
                "ConditionExpression": "reviewId = :previous",
                "ExpressionAttributeValues": {":previous": previous["reviewId"]},
            }
        item = {**key, "reviewId": str_attr(review.id), "createdUs": num_attr(created)}
        return {"Put": {"TableName": self._table, "Item": item, **condition}}

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
        pointers = self._query(_history_pk(project_id), "REVIEW#")
        return self._reviews([str(item["reviewId"]["S"]) for item in pointers])

    def list_active_reviews(self, project_id: str) -> list[Review]:
        pointers = sorted(
            (int(item["createdUs"]["N"]), str(item["reviewId"]["S"]))
            for item in self._query(f"PROJECT#{project_id}", "LATEST#")
        )
        return self._reviews([review_id for _, review_id in pointers])

    def list_reviews_page(
        self, project_id: str, before_review_id: str | None, limit: int
    ) -> list[Review] | None:
        upper = "REVIEW$"  # just past every "REVIEW#..." history key
        if before_review_id is not None:
            before = self.get_review(before_review_id)
            if before is None or before.project_id != project_id:
                return None
            upper = _history_sk(to_micros(before.created_at), before.id)
        response = self._client.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :lower AND :upper",
            ExpressionAttributeValues={
                ":pk": str_attr(_history_pk(project_id)),
                ":lower": str_attr("REVIEW#"),
                ":upper": str_attr(upper),
            },
            ScanIndexForward=False,
            Limit=limit + 1,  # BETWEEN includes `upper`, the review the page starts after
            ConsistentRead=True,
        )
        ids = [str(item["reviewId"]["S"]) for item in response.get("Items", [])]
        return self._reviews([i for i in ids if i != before_review_id][:limit])

    def _reviews(self, ids: list[str]) -> list[Review]:
        """The reviews named by `ids`, in that order, read in batches."""
        found = {
            review.id: review
            for review in map(self._review_from, self._batch_get([_review_key(i) for i in ids]))
        }
        return [found[review_id] for review_id in ids if review_id in found]

    def start_execution(
        self,
        review_id: str,
        commit: str,
        trigger: Trigger,
        generation: str,
        summary: ReceiptSummary,
    ) -> bool:
        execution = started_execution(commit, trigger, generation, summary)
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
        execution = started_execution(commit, "review-created", generation, summary)
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
                    ":newCommit": str_attr(commit),
                    ":oldCommit": str_attr(expected_commit),
                    ":data": str_attr(moved.model_dump_json(exclude={"execution", "approval"})),
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
            {":running": str_attr("running")},
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
                    ":generation": str_attr(generation),
                    ":running": str_attr("running"),
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
                "Key": claim_key(review.packet_id),
                "ConditionExpression": "agentId = :agent AND untilUs > :now",
                "ExpressionAttributeValues": {
                    ":agent": str_attr(review.agent_id),
                    ":now": num_attr(to_micros(now)),
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
                    ":running": str_attr("running"),
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
                {":running": str_attr("running")},
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
        values: Item = {":approval": json_attr(approval), ":commit": str_attr(approval.commit)}
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
                values[name] = str_attr(expected)
        return self._conditional(
            "update_item",
            TableName=self._table,
            Key=_review_key(review_id),
            UpdateExpression="SET approval = :approval",
            ConditionExpression=" AND ".join(conditions),
            ExpressionAttributeValues=values,
        )

    # --- Flow-Next review receipts ----------------------------------------------------
    def put_review_receipt(self, review_id: str, digest: str) -> None:
        item = {**item_key(f"REVIEW#{review_id}", f"FLOW#{digest}"), "digest": str_attr(digest)}
        self._client.put_item(TableName=self._table, Item=item)

    def list_review_receipts(self, review_id: str) -> list[str]:
        return [str(item["digest"]["S"]) for item in self._query(f"REVIEW#{review_id}", "FLOW#")]
