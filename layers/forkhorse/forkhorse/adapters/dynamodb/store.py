"""The AWS Store: every aggregate's DynamoDB adapter over one table."""

from forkhorse.adapters.dynamodb.leases import DynamoDbLeases
from forkhorse.adapters.dynamodb.principals import DynamoDbPrincipals
from forkhorse.adapters.dynamodb.projects import DynamoDbProjects
from forkhorse.adapters.dynamodb.promotions import DynamoDbPromotions
from forkhorse.adapters.dynamodb.records import DynamoDbRecords
from forkhorse.adapters.dynamodb.reviews import DynamoDbReviews


class DynamoDbStore(
    DynamoDbPrincipals,
    DynamoDbProjects,
    DynamoDbLeases,
    DynamoDbReviews,
    DynamoDbPromotions,
    DynamoDbRecords,
):
    """The `Store`: each aggregate's methods come from its mixin; all share one
    `DynamoDbTable` (client, table name, conditional writes)."""
