"""The DynamoDB adapters of the Store ports: one module per aggregate over `table`."""

from forkhorse.adapters.dynamodb.store import DynamoDbStore

__all__ = ["DynamoDbStore"]
