"""Tests on the synthesized CloudFormation (SAM transformed offline): least privilege, the
isolated quick-check network, no public route to the runner. Run by `make check` in the
tools venv, where the SAM translator lives."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from samtranslator.public.translator import ManagedPolicyLoader
from samtranslator.translator.transform import transform

from tests.support.aws import load_template

ROOT = Path(__file__).resolve().parents[2]
RUNNER_FUNCTIONS = (
    "PrepareFunction",
    "QuickCheckFunction",
    "QuickRecordFunction",
    "FullStartFunction",
    "FullPollFunction",
    "FinalizeFunction",
    "RunRecoveryFunction",
)


class _OfflinePolicies(ManagedPolicyLoader):
    """Managed policy ARNs by name, without calling IAM."""

    def __init__(self) -> None:
        """No IAM client: the names below are all the template uses."""

    def load(self) -> dict[str, str]:
        names = ("AWSLambdaBasicExecutionRole", "AWSLambdaVPCAccessExecutionRole")
        return {name: f"arn:aws:iam::aws:policy/service-role/{name}" for name in names}


def _as_packaged(template: dict[str, Any]) -> None:
    """What `sam package` does before the transform: local paths become S3 URIs."""
    for resource in template["Resources"].values():
        properties = resource.get("Properties", {})
        for key in ("CodeUri", "ContentUri", "DefinitionUri"):
            if isinstance(properties.get(key), str):
                properties[key] = f"s3://packaged/{properties[key].strip('/')}"


@pytest.fixture(scope="module")
def resources() -> dict[str, Any]:
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")  # ARNs are built for a region
    template = load_template()
    _as_packaged(template)
    parameters = {"DefaultImageReference": "repo/default@sha256:" + "0" * 64}
    synthesized = transform(template, parameters, _OfflinePolicies())
    found: dict[str, Any] = synthesized["Resources"]
    return found


def _role_of(resources: dict[str, Any], function: str) -> dict[str, Any]:
    role = resources[function]["Properties"]["Role"]["Fn::GetAtt"][0]
    found: dict[str, Any] = resources[role]["Properties"]
    return found


def _statements(role: dict[str, Any]) -> list[dict[str, Any]]:
    statements: list[dict[str, Any]] = []
    for policy in role.get("Policies", []):
        statements.extend(policy["PolicyDocument"]["Statement"])
    return statements


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else list(action)


def test_no_statement_grants_every_action_on_everything(resources: dict[str, Any]) -> None:
    for name, resource in resources.items():
        if resource["Type"] != "AWS::IAM::Role":
            continue
        for statement in _statements(resource["Properties"]):
            assert "*" not in _actions(statement), name
            assert not any(a.endswith(":*") for a in _actions(statement)), name


def test_the_quick_check_lambda_can_only_read_snapshots_and_drop_evidence(
    resources: dict[str, Any],
) -> None:
    role = _role_of(resources, "QuickCheckFunction")
    actions = {a for s in _statements(role) for a in _actions(s)}
    assert actions == {"s3:GetObject", "s3:ListBucket", "s3:PutObject"}
    managed = json.dumps(role.get("ManagedPolicyArns", []))
    assert "AWSLambdaVPCAccessExecutionRole" in managed
    assert "DynamoDB" not in managed


def test_the_quick_check_lambda_has_no_internet_route(resources: dict[str, Any]) -> None:
    config = resources["QuickCheckFunction"]["Properties"]["VpcConfig"]
    assert {s["Ref"] for s in config["SubnetIds"]} == {"IsolatedSubnetA", "IsolatedSubnetB"}
    kinds = {resource["Type"] for resource in resources.values()}
    assert "AWS::EC2::InternetGateway" not in kinds
    assert "AWS::EC2::NatGateway" not in kinds
    assert "AWS::EC2::Route" not in kinds, "the isolated route table has no routes of its own"
    endpoint = resources["S3GatewayEndpoint"]["Properties"]
    assert endpoint["VpcEndpointType"] == "Gateway"
    assert endpoint["RouteTableIds"] == [{"Ref": "IsolatedRouteTable"}]


def test_no_public_route_reaches_the_runner(resources: dict[str, Any]) -> None:
    for resource in resources.values():
        if resource["Type"] != "AWS::Lambda::Permission":
            continue
        target = json.dumps(resource["Properties"]["FunctionName"])
        if resource["Properties"]["Principal"] == "apigateway.amazonaws.com":
            assert not any(name in target for name in RUNNER_FUNCTIONS), target


def test_the_check_container_gets_no_aws_credentials(resources: dict[str, Any]) -> None:
    task = resources["CheckTaskDefinition"]["Properties"]
    assert "TaskRoleArn" not in task
    check = next(c for c in task["ContainerDefinitions"] if c["Name"] == "check")
    assert check["ReadonlyRootFilesystem"] is True
    assert check["DependsOn"] == [{"ContainerName": "fetch", "Condition": "SUCCESS"}]


def test_every_state_machine_substitution_is_declared(resources: dict[str, Any]) -> None:
    definition = (ROOT / "statemachine/receipt_run.asl.json").read_text()
    placeholders = set(re.findall(r"\$\{(\w+)\}", definition))
    machine = resources["ReceiptRunStateMachine"]["Properties"]
    assert set(machine["DefinitionSubstitutions"]) == placeholders


def test_the_image_is_only_ever_a_pinned_digest() -> None:
    template = load_template()
    pattern = re.compile(template["Parameters"]["DefaultImageReference"]["AllowedPattern"])
    assert pattern.fullmatch("123.dkr.ecr.us-east-1.amazonaws.com/fh@sha256:" + "a" * 64)
    assert not pattern.fullmatch("123.dkr.ecr.us-east-1.amazonaws.com/fh:latest")


def test_stateful_resources_are_protected(resources: dict[str, Any]) -> None:
    table = resources["ForkhorseTable"]["Properties"]
    assert table["DeletionProtectionEnabled"] is True
    assert table["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    bucket = resources["ForkhorseBucket"]["Properties"]
    assert all(bucket["PublicAccessBlockConfiguration"].values())
    assert bucket["VersioningConfiguration"] == {"Status": "Enabled"}


def _routes(resources: dict[str, Any]) -> dict[tuple[str, str], list[Any]]:
    """(method, path) -> the security the synthesized HTTP API applies to it."""
    body = resources["ForkhorseHttpApi"]["Properties"]["Body"]
    routes: dict[tuple[str, str], list[Any]] = {}
    for path, methods in body["paths"].items():
        for method, operation in methods.items():
            method_name = "ANY" if method == "x-amazon-apigateway-any-method" else method.upper()
            routes[(method_name, path)] = operation.get("security", [])
    return routes


def test_only_the_public_routes_skip_authorization(resources: dict[str, Any]) -> None:
    public = {route for route, security in _routes(resources).items() if security == [{"NONE": []}]}
    assert public == {
        ("GET", "/openapi.json"),
        ("GET", "/docs"),
        ("GET", "/"),
        ("GET", "/console/{proxy+}"),
        ("ANY", "/git/{proxy+}"),  # git smart HTTP checks Basic credentials itself
    }


def test_agent_routes_use_the_token_authorizer_and_owner_routes_use_cognito(
    resources: dict[str, Any],
) -> None:
    routes = _routes(resources)
    assert routes[("POST", "/projects/{projectId}/reviews")] == [{"AgentToken": []}]
    assert routes[("GET", "/projects/{projectId}/state")] == [{"AgentToken": []}]
    for owner_route in (
        ("POST", "/projects/{projectId}/reviews/{reviewId}/approve"),
        ("POST", "/projects/{projectId}/reviews/{reviewId}/promote"),
        ("PATCH", "/projects/{projectId}/settings"),
        ("GET", "/projects/{projectId}/reviews/{reviewId}/receipt"),
    ):
        assert routes[owner_route] == [{"OwnerJwt": []}], owner_route


def test_the_authorizer_can_only_read_token_hashes(resources: dict[str, Any]) -> None:
    role = _role_of(resources, "AgentAuthorizerFunction")
    actions = {a for s in _statements(role) for a in _actions(s)}
    assert actions == {"dynamodb:GetItem", "dynamodb:Query"}


def test_only_the_api_can_queue_promote_jobs(resources: dict[str, Any]) -> None:
    for name, resource in resources.items():
        if resource["Type"] != "AWS::IAM::Role":
            continue
        invokes = [
            s for s in _statements(resource["Properties"]) if "lambda:InvokeFunction" in _actions(s)
        ]
        if name.startswith("ApiFunction"):
            assert [s["Resource"] for s in invokes] == [{"Fn::GetAtt": ["PromoteFunction", "Arn"]}]
        elif not name.startswith("ReceiptRunStateMachine"):
            assert invokes == [], name
