"""Claims on packets and the per-project workflow lease in DynamoDB."""

from datetime import datetime, timedelta

from forkhorse.adapters.dynamodb.table import (
    EPOCH,
    DynamoDbTable,
    Item,
    item_key,
    json_attr,
    num_attr,
    str_attr,
    to_micros,
)
from forkhorse.domain.model import Claim, Lease, fence_holds


def claim_key(packet_id: str) -> Item:
    return item_key(f"CLAIM#{packet_id}", "CLAIM")


def lease_key(project_id: str) -> Item:
    return item_key(f"PROJECT#{project_id}", "LEASE")


class DynamoDbLeases(DynamoDbTable):
    # --- claims on packets -----------------------------------------------------------
    def claim_packet(
        self, packet_id: str, agent_id: str, ttl: timedelta, now: datetime
    ) -> Claim | None:
        claim = Claim(packet_id=packet_id, agent_id=agent_id, claimed_at=now, expires_at=now + ttl)
        claimed = self._conditional(
            "put_item",
            TableName=self._table,
            Item={
                **claim_key(packet_id),
                "agentId": str_attr(agent_id),
                "untilUs": num_attr(to_micros(claim.expires_at)),
                "data": json_attr(claim),
            },
            ConditionExpression="attribute_not_exists(pk) OR agentId = :agent OR untilUs <= :now",
            ExpressionAttributeValues={
                ":agent": str_attr(agent_id),
                ":now": num_attr(to_micros(now)),
            },
        )
        return claim if claimed else None

    def release_claim(self, packet_id: str, agent_id: str) -> bool:
        return self._conditional(
            "delete_item",
            TableName=self._table,
            Key=claim_key(packet_id),
            ConditionExpression="agentId = :agent",
            ExpressionAttributeValues={":agent": str_attr(agent_id)},
        )

    def live_claim(self, packet_id: str, now: datetime) -> Claim | None:
        item = self._get(claim_key(packet_id))
        claim = None if item is None else Claim.model_validate_json(item["data"]["S"])
        return claim if claim is not None and claim.is_live(now) else None

    def live_claims(self, packet_ids: list[str], now: datetime) -> dict[str, Claim]:
        items = self._batch_get([claim_key(packet_id) for packet_id in set(packet_ids)])
        held = (Claim.model_validate_json(item["data"]["S"]) for item in items)
        return {claim.packet_id: claim for claim in held if claim.is_live(now)}

    # --- the workflow lease ----------------------------------------------------------
    def _lease(self, project_id: str) -> Lease | None:
        item = self._get(lease_key(project_id))
        return None if item is None else Lease.model_validate_json(item["data"]["S"])

    def _put_lease(self, lease: Lease, condition: str, values: Item) -> bool:
        return self._conditional(
            "put_item",
            TableName=self._table,
            Item={
                **lease_key(lease.project_id),
                "holder": str_attr(lease.holder),
                "token": num_attr(lease.token),
                "untilUs": num_attr(to_micros(lease.expires_at)),
                "data": json_attr(lease),
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
            condition, values = "attribute_not_exists(pk) OR #token = :none", {":none": num_attr(0)}
        else:
            condition, values = "#token = :seen", {":seen": num_attr(held.token)}
        return token if self._put_lease(lease, condition, values) else None

    def _update_lease(self, lease: Lease, holder: str, token: int, live_at: datetime) -> bool:
        return self._put_lease(
            lease,
            "holder = :holder AND #token = :token AND untilUs > :now",
            {
                ":holder": str_attr(holder),
                ":token": num_attr(token),
                ":now": num_attr(to_micros(live_at)),
            },
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
        released = held.model_copy(update={"expires_at": EPOCH})
        return self._update_lease(released, holder, token, EPOCH)

    def check_fence(self, project_id: str, token: int, now: datetime) -> bool:
        return fence_holds(self._lease(project_id), token, now)
