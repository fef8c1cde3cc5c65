"""Promotions, their fence and the ledger in DynamoDB, guarded by the workflow lease."""

from collections.abc import Collection
from datetime import datetime

from forkhorse.adapters.dynamodb.leases import lease_key
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
    OPEN_PROMOTION_STATES,
    LedgerEntry,
    Promotion,
    Refusal,
    SettledState,
    check_settlement,
    may_request,
    may_settle,
    settled,
)


def _fence_key(project_id: str) -> Item:
    return item_key(f"PROJECT#{project_id}", "PROMOTION-FENCE")


def _promotion_job_key(review_id: str) -> Item:
    return item_key(f"REVIEW#{review_id}", "PROMOTION-JOB")


def _promoted_key(review_id: str) -> Item:
    return item_key(f"REVIEW#{review_id}", "PROMOTED")


def _published_key(project_id: str, commit: str) -> Item:
    return item_key(f"PROJECT#{project_id}", f"PUBLISHED#{commit}")


def _ledger_sk(entry: LedgerEntry) -> str:
    return f"LEDGER#{to_micros(entry.promoted_at):020d}#{entry.promotion_id}"


class DynamoDbPromotions(DynamoDbTable):
    def _promotion_key(self, project_id: str, promotion_id: str) -> Item:
        return item_key(f"PROJECT#{project_id}", f"PROMOTION#{promotion_id}")

    def _fence_check(self, project_id: str, token: int, now: datetime) -> Item:
        return {
            "ConditionCheck": {
                "TableName": self._table,
                "Key": lease_key(project_id),
                "ConditionExpression": "#token = :token AND untilUs > :now",
                "ExpressionAttributeNames": {"#token": "token"},
                "ExpressionAttributeValues": {
                    ":token": num_attr(token),
                    ":now": num_attr(to_micros(now)),
                },
            }
        }

    def _promotion_put(
        self, promotion: Promotion, condition: str, values: Item, extra: Item | None = None
    ) -> Item:
        return {
            "Put": {
                "TableName": self._table,
                "Item": {
                    **self._promotion_key(promotion.project_id, promotion.id),
                    "state": str_attr(promotion.state),
                    "data": json_attr(promotion),
                    **(extra or {}),
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
                "ExpressionAttributeValues": {":seen": str_attr(promotion.state)},
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
        job = {**_promotion_job_key(promotion.review_id), "promotionId": str_attr(promotion.id)}
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
        fence = {**_fence_key(project), "promotionId": str_attr(promotion.id)}
        return self._transact(
            self._fence_check(project, fencing_token, now),
            self._put_if_new(fence),
            self._promotion_put(
                pending,
                "attribute_not_exists(pk) OR #state = :queued",
                {":queued": str_attr("queued")},
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
            self._promotion_put(writing, "#state = :pending", {":pending": str_attr("pending")}),
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
        outcome = settled(promotion, state, now, refusal)
        # A done promotion keeps its entry, so reading one never pages through the ledger.
        entry = None if ledger_entry is None else {"ledger": json_attr(ledger_entry)}
        operations: list[Item] = [
            self._promotion_put(
                outcome, "#state = :from", {":from": str_attr(promotion.state)}, entry
            )
        ]
        if promotion.state in OPEN_PROMOTION_STATES and state != "uncertain":
            operations.append(
                {
                    "Delete": {
                        "TableName": self._table,
                        "Key": _fence_key(project_id),
                        "ConditionExpression": "promotionId = :id",
                        "ExpressionAttributeValues": {":id": str_attr(promotion_id)},
                    }
                }
            )
        if ledger_entry is not None:
            operations.extend(self._ledger_writes(outcome, ledger_entry))
        return self._transact(*operations)

    def _ledger_writes(self, promotion: Promotion, entry: LedgerEntry) -> list[Item]:
        """The entry, and what listings read instead of the ledger: the review's latest done
        promotion and the commit now published."""
        project = promotion.project_id
        promoted = {
            **_promoted_key(entry.review_id),
            "promotion": json_attr(promotion),
            "data": json_attr(entry),
        }
        return [
            self._put_if_new(
                {**item_key(f"PROJECT#{project}", _ledger_sk(entry)), "data": json_attr(entry)}
            ),
            {"Put": {"TableName": self._table, "Item": promoted}},
            {"Put": {"TableName": self._table, "Item": _published_key(project, entry.commit)}},
        ]

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

    def latest_promotion(self, project_id: str, review_id: str) -> Promotion | None:
        marker = self._get(_promotion_job_key(review_id))
        if marker is None:
            return None
        return self.get_promotion(project_id, marker["promotionId"]["S"])

    def ledger_entry(self, project_id: str, promotion_id: str) -> LedgerEntry | None:
        item = self._get(self._promotion_key(project_id, promotion_id))
        if item is None or "ledger" not in item:
            return None
        return LedgerEntry.model_validate_json(item["ledger"]["S"])

    def ledger_page(
        self, project_id: str, before_promotion_id: str | None, limit: int
    ) -> list[LedgerEntry] | None:
        upper = "LEDGER$"  # just past every "LEDGER#..." key
        if before_promotion_id is not None:
            before = self.ledger_entry(project_id, before_promotion_id)
            if before is None:
                return None
            upper = _ledger_sk(before)
        response = self._client.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :lower AND :upper",
            ExpressionAttributeValues={
                ":pk": str_attr(f"PROJECT#{project_id}"),
                ":lower": str_attr("LEDGER#"),
                ":upper": str_attr(upper),
            },
            ScanIndexForward=False,
            Limit=limit + 1,  # BETWEEN includes `upper`, the entry the page starts after
            ConsistentRead=True,
        )
        entries = [LedgerEntry.model_validate_json(i["data"]["S"]) for i in response["Items"]]
        return [e for e in entries if e.promotion_id != before_promotion_id][:limit]

    def done_promotions(
        self, project_id: str, review_ids: Collection[str]
    ) -> dict[str, tuple[Promotion, LedgerEntry]]:
        done: dict[str, tuple[Promotion, LedgerEntry]] = {}
        for item in self._batch_get([_promoted_key(review_id) for review_id in set(review_ids)]):
            entry = LedgerEntry.model_validate_json(item["data"]["S"])
            if entry.project_id == project_id:
                promotion = Promotion.model_validate_json(item["promotion"]["S"])
                done[entry.review_id] = (promotion, entry)
        return done

    def published_commits(self, project_id: str, commits: Collection[str]) -> set[str]:
        keys = [_published_key(project_id, commit) for commit in set(commits)]
        return {str(item["sk"]["S"]).removeprefix("PUBLISHED#") for item in self._batch_get(keys)}
