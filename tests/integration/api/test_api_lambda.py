"""The Lambda handlers on moto, driven by the sample events in `events/`."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from forkhorse.adapters.dynamodb import DynamoDbStore
from forkhorse.api import guards
from forkhorse.api.app import ForkhorseApi
from forkhorse.domain.model import Principal
from forkhorse.service.identity import token_hash
from forkhorse.wiring.aws import build_aws_service

from tests.support.aws import load_function
from tests.support.lambda_api import sample_event
from tests.support.lambda_context import FakeLambdaContext

OWNER_SUB = "6f1c2a8e-0b7d-4c3e-9a55-1d2e3f4a5b6c"
ANONYMOUS = {"isAuthorized": True, "context": {"kind": "anonymous"}}


def test_the_authorizer_resolves_token_hashes_only(aws: DynamoDbStore) -> None:
    now = datetime.now(UTC)
    agent = Principal(kind="agent", id="agent-a-0123456789ab", name="a", created_at=now)
    assert aws.create_principal(agent, token_hash("fh_example-token"))
    authorizer = load_function("authorizer")
    event = sample_event("api_authorizer_request.json")
    assert authorizer.handler(event, FakeLambdaContext()) == {
        "isAuthorized": True,
        "context": {"principalId": "agent-a-0123456789ab", "kind": "agent"},
    }
    event["headers"]["authorization"] = "Bearer fh_unknown"
    assert authorizer.handler(event, FakeLambdaContext()) == ANONYMOUS
    aws.revoke_principal(agent.id)
    event["headers"]["authorization"] = "Bearer fh_example-token"
    assert authorizer.handler(event, FakeLambdaContext()) == ANONYMOUS
    del event["headers"]["authorization"]
    assert authorizer.handler(event, FakeLambdaContext()) == ANONYMOUS


def _through_authorizer(event: dict[str, Any]) -> dict[str, Any]:
    """What API Gateway passes the API Lambda: the authorizer's context, never a refusal."""
    decision = load_function("authorizer").handler(event, FakeLambdaContext())
    assert decision["isAuthorized"] is True
    event["requestContext"]["authorizer"] = {"lambda": decision["context"]}
    return event


def _answer(response: dict[str, Any]) -> tuple[int, Any]:
    return response["statusCode"], json.loads(response["body"])


@pytest.mark.parametrize(
    ("authorization", "expected"),
    [
        ("Bearer fh_example-token", (403, {"error": "Only an owner may create projects."})),
        (None, (401, {"error": guards.NO_CREDENTIALS})),
        ("Bearer fh_unknown", (401, {"error": guards.BAD_CREDENTIALS})),
        ("Basic b3duZXI6cHc=", (401, {"error": guards.NO_CREDENTIALS})),
    ],
)
def test_refusals_on_aws_are_local_modes_status_and_error_body(
    aws: DynamoDbStore, authorization: str | None, expected: tuple[int, Any]
) -> None:
    """Spec: an agent on an owner route gets 403 with an {"error"} body; a missing or dead
    token gets 401 in local mode's words, never API Gateway's {"message"} bodies."""
    now = datetime.now(UTC)
    agent = Principal(kind="agent", id="agent-a-0123456789ab", name="a", created_at=now)
    assert aws.create_principal(agent, token_hash("fh_example-token"))
    create = sample_event("api_create_project.json")
    del create["requestContext"]["authorizer"]
    if authorization is not None:
        create["headers"]["authorization"] = authorization
    local_mode = ForkhorseApi(build_aws_service())  # checks the token itself, as locally
    local = _answer(local_mode.handle(copy.deepcopy(create)))
    on_aws = _answer(load_function("api").handler(_through_authorizer(create), FakeLambdaContext()))
    assert on_aws == local == expected
    assert aws.list_projects() == []


def test_the_api_function_trusts_the_lambda_authorizer(aws: DynamoDbStore) -> None:
    api = load_function("api")
    created = api.handler(sample_event("api_create_project.json"), FakeLambdaContext())
    assert created["statusCode"] == 201, created
    project = json.loads(created["body"])["project"]
    assert project["cloneUrl"].startswith("https://abc123.execute-api.us-east-1.amazonaws.com/git/")
    stored = aws.get_project(project["id"])
    assert stored is not None
    assert stored.owner_id == OWNER_SUB
    # The sample's project does not exist in this table.
    state = api.handler(sample_event("api_state_agent.json"), FakeLambdaContext())
    assert (state["statusCode"], json.loads(state["body"])) == (
        404,
        {"error": "Project not found."},
    )
    anonymous = sample_event("api_state_agent.json")
    del anonymous["requestContext"]["authorizer"]
    assert api.handler(anonymous, FakeLambdaContext())["statusCode"] == 401


def test_an_undeclared_method_reaching_the_api_function_is_405_with_allow(
    aws: DynamoDbStore,
) -> None:
    """The template's catch-all route sends it to the API function, as locally."""
    event = sample_event("api_create_project.json")
    event["requestContext"]["http"]["method"] = "PUT"
    event["routeKey"] = "ANY /{proxy+}"
    answered = load_function("api").handler(event, FakeLambdaContext())
    assert answered["statusCode"] == 405, answered
    assert answered["headers"]["Allow"] == "GET, POST"
    assert aws.list_projects() == []


def test_the_owner_sets_the_policy_through_the_api_function(aws: DynamoDbStore) -> None:
    api = load_function("api")
    created = api.handler(sample_event("api_create_project.json"), FakeLambdaContext())
    project_id = json.loads(created["body"])["project"]["id"]
    policy = sample_event("api_set_policy.json")
    assert api.handler(policy, FakeLambdaContext())["statusCode"] == 404, (
        "the sample's project is unknown"
    )
    path = f"/projects/{project_id}/policy"
    policy["rawPath"] = policy["requestContext"]["http"]["path"] = path
    answered = api.handler(policy, FakeLambdaContext())
    assert (answered["statusCode"], json.loads(answered["body"])) == (
        200,
        {"policy": {"protectChecks": True}},
    )
    stored = aws.get_project(project_id)
    assert stored is not None
    assert stored.protects_checks
    assert stored.effective_settings.require_receipt, "the settings are untouched"


def test_the_push_function_ignores_unknown_projects(aws: DynamoDbStore) -> None:
    push = load_function("push")
    assert push.handler(sample_event("push_follow.json"), FakeLambdaContext()) == {"moved": []}


def _cognito_owner(pool_name: str) -> tuple[str, str, str]:
    """A user pool with a console client and one owner; returns (pool, client, access token)."""
    cognito = boto3.client("cognito-idp")
    pool = cognito.create_user_pool(PoolName=pool_name)["UserPool"]["Id"]
    client = cognito.create_user_pool_client(
        UserPoolId=pool, ClientName="console", ExplicitAuthFlows=["ADMIN_NO_SRP_AUTH"]
    )["UserPoolClient"]["ClientId"]
    cognito.admin_create_user(UserPoolId=pool, Username="owner@example.com")
    cognito.admin_set_user_password(
        UserPoolId=pool, Username="owner@example.com", Password="Correct-Horse-9", Permanent=True
    )
    tokens = cognito.admin_initiate_auth(
        UserPoolId=pool,
        ClientId=client,
        AuthFlow="ADMIN_NO_SRP_AUTH",
        AuthParameters={"USERNAME": "owner@example.com", "PASSWORD": "Correct-Horse-9"},
    )["AuthenticationResult"]
    return pool, client, tokens["AccessToken"]


def test_the_authorizer_admits_this_pools_owner_access_tokens_only(
    aws: DynamoDbStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool, client, access = _cognito_owner("owners")
    _, _, foreign = _cognito_owner("someone-elses-pool")
    monkeypatch.setenv("OWNER_USER_POOL_ID", pool)
    monkeypatch.setenv("OWNER_CLIENT_ID", client)
    authorizer = load_function("authorizer")
    event = sample_event("api_authorizer_request.json")
    event["headers"]["authorization"] = f"Bearer {access}"
    decision = authorizer.handler(event, FakeLambdaContext())
    assert decision["isAuthorized"] is True
    assert decision["context"]["kind"] == "owner"
    sub = boto3.client("cognito-idp").get_user(AccessToken=access)["UserAttributes"]
    assert decision["context"]["principalId"] == next(a["Value"] for a in sub if a["Name"] == "sub")
    event["headers"]["authorization"] = f"Bearer {foreign}"
    assert authorizer.handler(event, FakeLambdaContext()) == ANONYMOUS, "another pool's token"
    event["headers"]["authorization"] = f"Bearer {access[:-4]}AAAA"
    assert authorizer.handler(event, FakeLambdaContext()) == ANONYMOUS, "a forged signature"
