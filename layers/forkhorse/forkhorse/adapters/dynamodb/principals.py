"""Principals in DynamoDB: a principal item and a token item, written together."""

from forkhorse.adapters.dynamodb.table import DynamoDbTable, Item, item_key, json_attr, str_attr
from forkhorse.domain.model import Principal


class DynamoDbPrincipals(DynamoDbTable):
    def create_principal(self, principal: Principal, token_hash: str) -> bool:
        record = {
            **item_key("PRINCIPALS", f"PRINCIPAL#{principal.id}"),
            "kind": str_attr(principal.kind),
            "tokenHash": str_attr(token_hash),
            "data": json_attr(principal),
        }
        token = {**item_key(f"TOKEN#{token_hash}", "TOKEN"), "principalId": str_attr(principal.id)}
        return self._transact(self._put_if_new(record), self._put_if_new(token))

    def _principal_item(self, principal_id: str) -> Item | None:
        return self._get(item_key("PRINCIPALS", f"PRINCIPAL#{principal_id}"))

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
        token = self._get(item_key(f"TOKEN#{token_hash}", "TOKEN"))
        principal = None if token is None else self.get_principal(token["principalId"]["S"])
        return None if principal is None or principal.revoked else principal

    def revoke_principal(self, principal_id: str) -> bool:
        item = self._principal_item(principal_id)
        if item is None:
            return False
        principal = Principal.model_validate_json(item["data"]["S"])
        revoked = principal.model_copy(update={"revoked": True})
        token_key = item_key(f"TOKEN#{item['tokenHash']['S']}", "TOKEN")
        update = {
            "Update": {
                "TableName": self._table,
                "Key": item_key("PRINCIPALS", f"PRINCIPAL#{principal_id}"),
                "UpdateExpression": "SET #data = :data",
                "ExpressionAttributeNames": {"#data": "data"},
                "ExpressionAttributeValues": {":data": json_attr(revoked)},
            }
        }
        return self._transact(update, {"Delete": {"TableName": self._table, "Key": token_key}})
