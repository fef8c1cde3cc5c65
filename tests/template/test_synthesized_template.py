"""Tests on the synthesized CloudFormation (SAM transformed offline): least privilege, the
isolated quick-check network, no public route to the runner. Run by `make check` in the
tools venv, where the SAM translator lives."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from samtranslator.public.translator import ManagedPolicyLoader
from samtranslator.translator.transform import transform

from tests.support.aws import load_template

ROOT = Path(__file__).resolve().parents[2]
PROMOTE_STEPS = (
    "PromoteAcquireFunction",
    "PromoteStartRunFunction",
    "PromoteVerifyFunction",
    "PromoteWriteFunction",
    "PromoteReleaseFunction",
    "PromoteSettleFunction",
)
RUNNER_FUNCTIONS = (
    "PrepareFunction",
    "QuickCheckFunction",
    "QuickCheckJsFunction",
    "QuickRecordFunction",
    "FullStartFunction",
    "FullStoppedFunction",
    "FullOvertimeFunction",
    "FinalizeFunction",
    "RunRecoveryFunction",
    "CollectGarbageFunction",
    *PROMOTE_STEPS,
)
MACHINES = {
    "ReceiptRunStateMachine": "statemachine/receipt_run.asl.json",
    "PromoteRunStateMachine": "statemachine/promote.asl.json",
}


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
    properties = resources[function]["Properties"]
    role = properties.get("Role", properties.get("RoleArn"))["Fn::GetAtt"][0]
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


QUICK_FUNCTIONS = ("QuickCheckFunction", "QuickCheckJsFunction")


@pytest.mark.parametrize("function", QUICK_FUNCTIONS)
def test_the_quick_check_lambda_can_only_read_snapshots_and_drop_evidence(
    resources: dict[str, Any], function: str
) -> None:
    role = _role_of(resources, function)
    actions = {a for s in _statements(role) for a in _actions(s)}
    assert actions == {"s3:GetObject", "s3:ListBucket", "s3:PutObject"}
    managed = json.dumps(role.get("ManagedPolicyArns", []))
    assert "AWSLambdaVPCAccessExecutionRole" in managed
    assert "DynamoDB" not in managed


@pytest.mark.parametrize("function", QUICK_FUNCTIONS)
def test_the_quick_check_lambda_has_no_internet_route(
    resources: dict[str, Any], function: str
) -> None:
    config = resources[function]["Properties"]["VpcConfig"]
    assert config["SecurityGroupIds"] == [{"Ref": "QuickCheckSecurityGroup"}]
    assert {s["Ref"] for s in config["SubnetIds"]} == {"IsolatedSubnetA", "IsolatedSubnetB"}
    kinds = {resource["Type"] for resource in resources.values()}
    assert "AWS::EC2::InternetGateway" not in kinds
    assert "AWS::EC2::NatGateway" not in kinds
    assert "AWS::EC2::Route" not in kinds, "the isolated route table has no routes of its own"
    endpoint = resources["S3GatewayEndpoint"]["Properties"]
    assert endpoint["VpcEndpointType"] == "Gateway"
    assert endpoint["RouteTableIds"] == [{"Ref": "IsolatedRouteTable"}]


def test_the_javascript_quick_lambda_is_the_python_one_plus_node(
    resources: dict[str, Any],
) -> None:
    """Same handler, code, limits, network and grants; only NodeRuntimeLayer is added."""
    python, javascript = (resources[name]["Properties"] for name in QUICK_FUNCTIONS)
    for key in ("Handler", "Runtime", "MemorySize", "Timeout", "VpcConfig", "Environment"):
        assert javascript[key] == python[key], key
    assert javascript["Code"]["S3Key"] == python["Code"]["S3Key"]
    (forkhorse,) = python["Layers"]
    first, node = javascript["Layers"]  # SAM names each layer version by a content hash
    assert first == forkhorse
    assert node["Ref"].startswith("NodeRuntimeLayer")
    roles = [_role_of(resources, name) for name in QUICK_FUNCTIONS]
    assert _statements(roles[0]) == _statements(roles[1])
    assert roles[0]["ManagedPolicyArns"] == roles[1]["ManagedPolicyArns"]


def test_the_receipt_run_may_invoke_both_quick_functions(resources: dict[str, Any]) -> None:
    role = _role_of(resources, "ReceiptRunStateMachine")
    invoked = json.dumps([s["Resource"] for s in _statements(role)])
    assert all(name in invoked for name in QUICK_FUNCTIONS)


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


@pytest.mark.parametrize("machine", MACHINES)
def test_every_state_machine_substitution_is_declared(
    resources: dict[str, Any], machine: str
) -> None:
    definition = (ROOT / MACHINES[machine]).read_text()
    placeholders = set(re.findall(r"\$\{(\w+)\}", definition))
    properties = resources[machine]["Properties"]
    assert set(properties["DefinitionSubstitutions"]) == placeholders


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
        ("GET", "/favicon.ico"),  # the console's mark: browsers ask unprompted
        ("GET", "/keys"),  # the public keys that verify evidence
        ("GET", "/log"),  # the transparency log's status
        ("GET", "/log/{proxy+}"),  # its checkpoint, tiles and key (c2sp.org/tlog-tiles)
        ("ANY", "/git/{proxy+}"),  # git smart HTTP checks Basic credentials itself
    }


def test_every_route_the_api_serves_is_routed_on_aws(resources: dict[str, Any]) -> None:
    """The committed OpenAPI document (what `forkhorse serve` answers) against the HTTP
    API's routes: a route missing here answers nothing on AWS."""
    document = json.loads((ROOT / "openapi.json").read_text())
    served = {
        (method.upper(), re.sub(r"\{(\w+)\}", _camel_parameter, path))
        for path, methods in document["paths"].items()
        for method in methods
    }
    routed = _routes(resources)
    assert served - set(routed) == set()
    # Any other method or path reaches the API (405 with `Allow`, or 404), authorized.
    assert routed[("ANY", "/{proxy+}")] == routed[("GET", "/projects")] != [{"NONE": []}]


def _camel_parameter(match: re.Match[str]) -> str:
    head, *rest = match.group(1).split("_")
    return "{" + head + "".join(word.title() for word in rest) + "}"


def test_check_archives_expire(resources: dict[str, Any]) -> None:
    """Each reviewed commit's archive (its tree and `.git`) is only read while its task
    starts: the bucket expires them, so reviews do not accumulate them."""
    rules = resources["ForkhorseBucket"]["Properties"]["LifecycleConfiguration"]["Rules"]
    [archives] = [rule for rule in rules if rule["Prefix"] == "archives/"]
    assert archives["Status"] == "Enabled"
    assert archives["ExpirationInDays"] == 1
    assert archives["NoncurrentVersionExpiration"] == {"NoncurrentDays": 1}


SIGNERS = (
    "FinalizeFunction",
    "PromoteWriteFunction",
    "PromoteSettleFunction",
    "LogPublisherFunction",
)


def test_only_the_trusted_steps_may_sign_evidence(resources: dict[str, Any]) -> None:
    """Invariant 10: the key policy names the four signing roles and no one else may sign
    (not the account's administrators); no role's own policy grants kms:Sign either."""
    key = resources["SigningKey"]["Properties"]
    assert (key["KeySpec"], key["KeyUsage"]) == ("ECC_NIST_P256", "SIGN_VERIFY")
    statements = key["KeyPolicy"]["Statement"]
    signing = [s for s in statements if "kms:Sign" in _actions(s)]
    assert len(signing) == 1
    roles = signing[0]["Principal"]["AWS"]
    assert roles == [{"Fn::GetAtt": [f"{name}Role", "Arn"]} for name in SIGNERS]
    for statement in statements:
        assert not any(action in ("kms:*", "*") for action in _actions(statement))
    for name, resource in resources.items():
        if resource["Type"] == "AWS::IAM::Role":
            for statement in _statements(resource["Properties"]):
                granted = _actions(statement)
                assert not any(a.startswith("kms:Sign") or a == "kms:*" for a in granted), name
    for name in SIGNERS:
        variables = resources[name]["Properties"]["Environment"]["Variables"]
        assert variables["FORKHORSE_SIGNING_KEY"] == {"Ref": "SigningKey"}
    named = {
        name
        for name, resource in resources.items()
        if resource["Type"] == "AWS::Lambda::Function"
        and "FORKHORSE_SIGNING_KEY"
        in resource["Properties"].get("Environment", {}).get("Variables", {})
    }
    assert named == set(SIGNERS)


def test_every_authenticated_route_uses_the_one_bearer_token_authorizer(
    resources: dict[str, Any],
) -> None:
    """Owners and agents pass the same authorizer, so an agent on an owner route reaches
    the API and gets the spec's 403 {"error"}, not a JWT authorizer's 401."""
    body = resources["ForkhorseHttpApi"]["Properties"]["Body"]
    schemes = body["components"]["securitySchemes"]
    assert set(schemes) == {"BearerToken"}
    authorizer = schemes["BearerToken"]["x-amazon-apigateway-authorizer"]
    assert authorizer["type"] == "request"
    # No identity source: a request without a token reaches the API for local mode's 401;
    # with none, caching must be (and is) off.
    assert authorizer.get("identitySource", []) == []
    assert authorizer["authorizerResultTtlInSeconds"] == 0
    for route, security in _routes(resources).items():
        assert security in ([{"NONE": []}], [{"BearerToken": []}]), route
    for owner_route in (
        ("POST", "/projects/{projectId}/reviews/{reviewId}/approve"),
        ("PUT", "/projects/{projectId}/policy"),
    ):
        assert _routes(resources)[owner_route] == [{"BearerToken": []}], owner_route


def test_the_authorizer_can_only_read_token_hashes(resources: dict[str, Any]) -> None:
    role = _role_of(resources, "BearerTokenAuthorizerFunction")
    actions = {a for s in _statements(role) for a in _actions(s)}
    assert actions == {"dynamodb:GetItem", "dynamodb:Query"}


def _promote_states() -> dict[str, Any]:
    states: dict[str, Any] = json.loads((ROOT / MACHINES["PromoteRunStateMachine"]).read_text())[
        "States"
    ]
    return states


def test_every_promote_resource_is_substituted() -> None:
    """No account, region or name is written into the definition: each Lambda and the
    nested machine come through DefinitionSubstitutions."""
    for name, state in _promote_states().items():
        if state["Type"] != "Task":
            continue
        resource = state["Resource"]
        if resource.startswith("arn:aws:states:::"):  # a service integration, not a resource
            assert re.fullmatch(r"\$\{\w+\}", state["Parameters"]["StateMachineArn"]), name
        else:
            assert re.fullmatch(r"\$\{\w+\}", resource), name


def test_every_promote_state_settles_its_failures() -> None:
    """A Catch on every Task routes any error to Settle (Settle's own goes to a Fail)."""
    states = _promote_states()
    for name, state in states.items():
        if state["Type"] != "Task":
            continue
        [catch] = state["Catch"]
        assert catch["ErrorEquals"] == ["States.ALL"], name
        if name == "Settle":
            assert states[catch["Next"]]["Type"] == "Fail"
        elif name == "BeforePromoteRun":
            # A failed nested run is judged by Verify, whose refusal is the exact 409.
            assert catch["Next"] == "Verify"
        else:
            assert (catch["Next"], catch["ResultPath"]) == ("Settle", "$.error"), name


def test_the_promote_machine_waits_for_the_nested_receipt_run() -> None:
    states = _promote_states()
    nested = states["BeforePromoteRun"]
    assert nested["Resource"] == "arn:aws:states:::states:startExecution.sync:2"
    assert nested["Parameters"]["StateMachineArn"] == "${ReceiptRunStateMachineArn}"
    receipt = json.loads((ROOT / MACHINES["ReceiptRunStateMachine"]).read_text())
    # The nested run ends by its own timeout before the promote's task gives up on it.
    assert nested["TimeoutSeconds"] > receipt["TimeoutSeconds"]
    [busy] = [r for r in states["Acquire"]["Retry"] if r["ErrorEquals"] == ["LeaseBusy"]]
    assert busy["MaxAttempts"] > 1


def _limits() -> ModuleType:
    """The service's limits module, read from its file: the tools venv has no forkhorse
    installed, and the module needs nothing but the standard library."""
    path = ROOT / "layers/forkhorse/forkhorse/domain/limits.py"
    spec = importlib.util.spec_from_file_location("forkhorse_limits", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module while defined
    spec.loader.exec_module(module)
    return module


def test_the_lease_cap_is_the_receipt_machines_timeout() -> None:
    """The promote lease's TTL is capped at the longest a ReceiptRun can last: the constant
    the service caps it with is the receipt machine's own timeout."""
    receipt = json.loads((ROOT / MACHINES["ReceiptRunStateMachine"]).read_text())
    assert receipt["TimeoutSeconds"] == _limits().RECEIPT_RUN_TIMEOUT_SECONDS


def test_the_write_step_is_never_retried_once_it_may_have_run() -> None:
    """Only a throttled invoke (which never ran the step) is retried; any other error
    settles, so a canonical write cannot happen twice."""
    [retry] = _promote_states()["Write"]["Retry"]
    assert retry["ErrorEquals"] == ["Lambda.TooManyRequestsException"]


def _allowed(role: dict[str, Any], action: str) -> list[Any]:
    return [
        s["Resource"] for s in _statements(role) if s["Effect"] == "Allow" and action in _actions(s)
    ]


PUBLISHER = {"Fn::GetAtt": ["LogPublisherFunction", "Arn"]}
# Every function that appends to the transparency log (and so asks for its publish).
LOG_APPENDERS = (
    "ApiFunction",  # approvals, settings, policies
    "GitHttpFunction",  # canonical's import
    "FinalizeFunction",  # receipts
    "RunRecoveryFunction",  # an interrupted run's receipt
    "PromoteWriteFunction",  # promotions (and their approval and receipt again)
    "PromoteSettleFunction",  # a write that landed unattested
)


def test_functions_invoke_no_function_but_the_log_publisher(resources: dict[str, Any]) -> None:
    """The PromoteFunction and its queueing are gone: a function invokes no other, but an
    appender asks the log's publisher to publish; the machines invoke their steps."""
    assert "PromoteFunction" not in resources
    appender_roles = {f"{name}Role" for name in LOG_APPENDERS}
    for name, resource in resources.items():
        if resource["Type"] == "AWS::IAM::Role" and not name.endswith("StateMachineRole"):
            invoked = _allowed(resource["Properties"], "lambda:InvokeFunction")
            assert invoked == ([PUBLISHER] if name in appender_roles else []), name
    for name in LOG_APPENDERS:
        variables = resources[name]["Properties"]["Environment"]["Variables"]
        assert variables["LOG_PUBLISHER_FUNCTION"] == {"Ref": "LogPublisherFunction"}, name


def test_the_log_publisher_publishes_alone_and_only_the_log(resources: dict[str, Any]) -> None:
    """One publish at a time (the checkpoint never goes back); its schedule republishes what
    a lost invoke left and self-checks; it may write only the ledger's items and the objects
    under log/, and its self-check's problems are alarmed."""
    publisher = resources["LogPublisherFunction"]["Properties"]
    assert publisher["ReservedConcurrentExecutions"] == 1
    schedule = resources["LogPublisherFunctionSelfCheck"]["Properties"]["ScheduleExpression"]
    assert schedule == "rate(15 minutes)"
    statements = _statements(_role_of(resources, "LogPublisherFunction"))
    writes = [s for s in statements if set(_actions(s)) & {"dynamodb:PutItem", "s3:PutObject"}]
    assert [_actions(s) for s in writes] == [
        ["dynamodb:UpdateItem", "dynamodb:PutItem", "dynamodb:DeleteItem"],
        ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
    ]
    ledger, files = writes
    leading = {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["LOG*"]}}
    assert ledger["Condition"] == leading
    assert files["Resource"] == {"Fn::Sub": "${ForkhorseBucket.Arn}/log/*"}
    granted = {a for s in statements for a in _actions(s)}
    assert granted == {
        "dynamodb:GetItem", "dynamodb:Query", "dynamodb:BatchGetItem", "dynamodb:UpdateItem",
        "dynamodb:PutItem", "dynamodb:DeleteItem", "s3:GetObject", "s3:PutObject",
        "s3:DeleteObject", "s3:ListBucket", "sqs:SendMessage",
    }  # fmt: skip
    alarm = resources["LogSelfCheckAlarm"]["Properties"]
    assert (alarm["Namespace"], alarm["MetricName"]) == ("Forkhorse", "LogSelfCheckProblems")
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)
    assert alarm["Dimensions"] == [{"Name": "service", "Value": "forkhorse"}]
    assert alarm["AlarmActions"] == [{"Ref": "OperatorAlarmTopic"}]


def test_the_api_serves_the_log_and_its_public_key(resources: dict[str, Any]) -> None:
    """Tiles from log/ and the key's public half, never a signature; the API and the
    publisher name the log by one origin, derived from the stack unless given."""
    api = _role_of(resources, "ApiFunction")
    assert {"Fn::Sub": "${ForkhorseBucket.Arn}/log/*"} in _allowed(api, "s3:GetObject")
    assert _allowed(api, "kms:GetPublicKey") == [{"Fn::GetAtt": ["SigningKey", "Arn"]}]
    variables = {
        name: resources[name]["Properties"]["Environment"]["Variables"]
        for name in ("ApiFunction", "LogPublisherFunction")
    }
    assert variables["ApiFunction"]["LOG_KEY_ID"] == {"Ref": "SigningKey"}
    origin = variables["ApiFunction"]["LOG_ORIGIN"]
    assert origin == variables["LogPublisherFunction"]["LOG_ORIGIN"]
    condition, derived, given = origin["Fn::If"]
    assert (condition, given) == ("LogOriginFromStack", {"Ref": "LogOrigin"})
    assert "${AWS::StackName}" in derived["Fn::Sub"]
    rules = resources["ForkhorseBucket"]["Properties"]["LifecycleConfiguration"]["Rules"]
    [log_files] = [rule for rule in rules if rule["Prefix"] == "log/"]
    assert "ExpirationInDays" not in log_files, "tiles are the log: they never expire"


def test_the_api_may_only_start_promote_runs(resources: dict[str, Any]) -> None:
    api = _role_of(resources, "ApiFunction")
    assert _allowed(api, "states:StartExecution") == [
        {"Ref": "ReceiptRunStateMachine"},
        {"Ref": "PromoteRunStateMachine"},
    ]
    assert _allowed(api, "states:StopExecution") == []
    for name, resource in resources.items():
        if resource["Type"] == "AWS::IAM::Role" and not name.startswith("ApiFunction"):
            started = _allowed(resource["Properties"], "states:StartExecution")
            assert {"Ref": "PromoteRunStateMachine"} not in started, name


def test_the_promote_machine_may_only_run_its_steps_and_the_receipt_machine(
    resources: dict[str, Any],
) -> None:
    role = _role_of(resources, "PromoteRunStateMachine")
    invoked = [json.dumps(r) for r in _allowed(role, "lambda:InvokeFunction")]
    assert len(invoked) == len(PROMOTE_STEPS)
    assert all(any(step in r for step in PROMOTE_STEPS) for r in invoked)
    assert _allowed(role, "states:StartExecution") == [{"Ref": "ReceiptRunStateMachine"}]
    for action in ("states:DescribeExecution", "states:StopExecution"):
        [executions] = _allowed(role, action)
        assert "execution:${ReceiptRunStateMachine.Name}:*" in json.dumps(executions)
    for action in ("events:PutTargets", "events:PutRule", "events:DescribeRule"):
        [rule] = _allowed(role, action)
        assert json.dumps(rule).endswith(
            'rule/StepFunctionsGetEventsForStepFunctionsExecutionRule"}'
        )


def test_only_the_write_step_may_write_canonical(resources: dict[str, Any]) -> None:
    [deny] = resources["NoCanonicalWritesPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert deny["Effect"] == "Deny"
    assert set(_actions(deny)) >= {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"}
    assert deny["Condition"] == {
        "ForAnyValue:StringLike": {"dynamodb:LeadingKeys": ["REPO#*#canonical"]}
    }
    for step in PROMOTE_STEPS:
        managed = _role_of(resources, step).get("ManagedPolicyArns", [])
        denied = {"Ref": "NoCanonicalWritesPolicy"} in managed
        assert denied == (step != "PromoteWriteFunction"), step


def test_recovery_watches_both_machines_and_cannot_write_canonical(
    resources: dict[str, Any],
) -> None:
    """A PromoteRun that dies without its Settle state is settled by RunRecoveryFunction,
    which reads canonical's head to reconcile an uncertain write but may never write it."""
    pattern = resources["RunRecoveryFunctionExecutionEnded"]["Properties"]["EventPattern"]
    assert pattern["detail"]["stateMachineArn"] == [
        {"Ref": "ReceiptRunStateMachine"},
        {"Ref": "PromoteRunStateMachine"},
    ]
    assert pattern["detail"]["status"] == ["FAILED", "TIMED_OUT", "ABORTED"]
    managed = _role_of(resources, "RunRecoveryFunction").get("ManagedPolicyArns", [])
    assert {"Ref": "NoCanonicalWritesPolicy"} in managed


def test_the_sweeper_lists_both_machines_executions(resources: dict[str, Any]) -> None:
    statements = _statements(_role_of(resources, "RunRecoveryFunction"))
    [listing] = [s for s in statements if _actions(s) == ["states:ListExecutions"]]
    assert listing["Resource"] == [
        {"Ref": "ReceiptRunStateMachine"},
        {"Ref": "PromoteRunStateMachine"},
    ]
    schedule = resources["RunRecoveryFunctionSweep"]["Properties"]["ScheduleExpression"]
    assert schedule == "rate(5 minutes)"


def test_the_collector_runs_hourly_and_deletes_only_records_and_packs(
    resources: dict[str, Any],
) -> None:
    schedule = resources["CollectGarbageFunctionHourly"]["Properties"]["ScheduleExpression"]
    assert schedule == "rate(1 hour)"
    role = _role_of(resources, "CollectGarbageFunction")
    assert role.get("ManagedPolicyArns", []) == [
        "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
        XRAY_WRITE,
    ]
    by_action = {a: s for s in _statements(role) for a in _actions(s)}
    assert by_action.pop("sqs:SendMessage")["Resource"] == FAILED_EVENTS_QUEUE
    assert set(by_action) == {
        "dynamodb:GetItem",
        "dynamodb:Query",
        "dynamodb:Scan",
        "dynamodb:DeleteItem",
        "dynamodb:ConditionCheckItem",
        "s3:ListBucket",
        "s3:GetObject",
        "s3:DeleteObject",
    }
    for action in ("dynamodb:DeleteItem", "dynamodb:ConditionCheckItem"):
        condition = by_action[action]["Condition"]
        assert condition == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["RECORD#*"]}}
    for action in ("s3:GetObject", "s3:DeleteObject"):
        resource = by_action[action]["Resource"]
        assert resource == {"Fn::Sub": "${ForkhorseBucket.Arn}/git/*/packs/*"}, action


XRAY_WRITE = "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess"


def test_every_function_but_the_quick_checks_and_both_machines_are_traced(
    resources: dict[str, Any],
) -> None:
    """X-Ray follows a request through the API, the machines and their steps; the quick
    checks' isolated subnets reach only S3, so they neither trace nor may write traces."""
    functions = {
        name: resource["Properties"]
        for name, resource in resources.items()
        if resource["Type"] == "AWS::Lambda::Function"
    }
    for name, properties in functions.items():
        traced = name not in QUICK_FUNCTIONS
        mode = properties.get("TracingConfig", {}).get("Mode")
        assert mode == ("Active" if traced else None), name
        managed = _role_of(resources, name).get("ManagedPolicyArns", [])
        assert (XRAY_WRITE in managed) == traced, name
        variables = properties["Environment"]["Variables"]
        assert variables["POWERTOOLS_METRICS_NAMESPACE"] == "Forkhorse", name
        assert (variables.get("POWERTOOLS_TRACE_DISABLED") == "true") != traced, name
    for machine in MACHINES:
        assert resources[machine]["Properties"]["TracingConfiguration"] == {"Enabled": True}


# --- operations hygiene: failed events, reserved concurrency, access logs ----------------

FAILED_EVENTS_QUEUE = {"Fn::GetAtt": ["FailedEventsQueue", "Arn"]}
# Event sources that invoke a function asynchronously (Lambda queues the event and retries).
ASYNC_EVENT_TYPES = {"EventBridgeRule", "Schedule", "ScheduleV2", "CloudWatchEvent", "SNS", "S3"}


def _asynchronously_invoked() -> set[str]:
    return {
        name
        for name, resource in load_template()["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
        and any(
            event["Type"] in ASYNC_EVENT_TYPES
            for event in resource["Properties"].get("Events", {}).values()
        )
    }


def test_every_asynchronously_invoked_function_keeps_the_events_it_fails_on(
    resources: dict[str, Any],
) -> None:
    """An event that still fails after Lambda's retries lands in FailedEventsQueue, whose
    alarm tells the operators; a function invoked synchronously returns its error instead."""
    invoked = _asynchronously_invoked()
    assert invoked >= {
        "PushFunction",
        "RunRecoveryFunction",
        "CollectGarbageFunction",
        "LogPublisherFunction",
    }
    for name, resource in resources.items():
        if resource["Type"] != "AWS::Lambda::Function":
            continue
        dead_letters = resource["Properties"].get("DeadLetterConfig", {}).get("TargetArn")
        assert dead_letters == (FAILED_EVENTS_QUEUE if name in invoked else None), name
        if name in invoked:
            assert _allowed(_role_of(resources, name), "sqs:SendMessage") == [FAILED_EVENTS_QUEUE]
    queue = resources["FailedEventsQueue"]["Properties"]
    assert queue["SqsManagedSseEnabled"] is True
    assert queue["MessageRetentionPeriod"] == 14 * 24 * 3600
    alarm = resources["FailedEventsAlarm"]["Properties"]
    assert (alarm["Namespace"], alarm["MetricName"]) == (
        "AWS/SQS",
        "ApproximateNumberOfMessagesVisible",
    )
    assert alarm["Dimensions"] == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": ["FailedEventsQueue", "QueueName"]}}
    ]
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)
    assert alarm["AlarmActions"] == [{"Ref": "OperatorAlarmTopic"}]


# Each reservation is explained in docs/operations.md ("Concurrency").
RESERVED_CONCURRENCY = {
    "QuickCheckFunction": 200,
    "QuickCheckJsFunction": 100,
    "FullStartFunction": 50,
    "FullStoppedFunction": 50,
    "FullOvertimeFunction": 20,
    "ApiFunction": 100,
    "BearerTokenAuthorizerFunction": 100,
    "LogPublisherFunction": 1,  # publishes never overlap: the checkpoint never goes back
}
ACCOUNT_CONCURRENCY = 1000  # Lambda's default quota per Region
UNRESERVED_MINIMUM = 100  # Lambda refuses reservations that leave less


def test_the_check_lambdas_and_the_api_have_their_own_concurrency(
    resources: dict[str, Any],
) -> None:
    """A burst of checks is capped by its own reservation, so it can neither take the whole
    account nor starve the API (nor the authorizer every API request runs)."""
    reserved = {
        name: resource["Properties"]["ReservedConcurrentExecutions"]
        for name, resource in resources.items()
        if resource["Type"] == "AWS::Lambda::Function"
        and "ReservedConcurrentExecutions" in resource["Properties"]
    }
    assert reserved == RESERVED_CONCURRENCY
    assert sum(reserved.values()) + UNRESERVED_MINIMUM <= ACCOUNT_CONCURRENCY
    documented = (ROOT / "docs/operations.md").read_text()
    for name, count in reserved.items():
        assert f"`{name}` | {count} |" in documented, name


# What the access log may carry: $context variables of the request, never a header (bearer
# tokens and git's Basic credentials) nor the query string (the console's sign-in code).
ACCESS_LOG_FIELDS = {
    "requestId", "ip", "method", "routeKey", "path", "status", "latency", "integrationError",
}  # fmt: skip


def test_the_http_api_logs_each_request_as_json_without_credentials(
    resources: dict[str, Any],
) -> None:
    settings = resources["ForkhorseHttpApiApiGatewayDefaultStage"]["Properties"][
        "AccessLogSettings"
    ]
    assert settings["DestinationArn"] == {"Fn::GetAtt": ["ApiAccessLogGroup", "Arn"]}
    assert resources["ApiAccessLogGroup"]["Properties"]["RetentionInDays"] == 30
    line = json.loads(settings["Format"])
    assert set(line) >= ACCESS_LOG_FIELDS
    for field, variable in line.items():
        assert re.fullmatch(r"\$context\.[\w.]+", variable), field
        lowered = variable.lower()
        assert not any(word in lowered for word in ("header", "query", "authorization")), field


# --- Graviton ------------------------------------------------------------------------------


def test_every_function_and_layer_is_built_for_arm64(resources: dict[str, Any]) -> None:
    for name, resource in resources.items():
        if resource["Type"] == "AWS::Lambda::Function":
            assert resource["Properties"]["Architectures"] == ["arm64"], name
        if resource["Type"] == "AWS::Lambda::LayerVersion":
            assert resource["Properties"]["CompatibleArchitectures"] == ["arm64"], name
    template = load_template()["Resources"]
    for layer in ("ForkhorseLayer", "NodeRuntimeLayer"):
        assert template[layer]["Metadata"]["BuildArchitecture"] == "arm64", layer
    # A makefile build learns no architecture from SAM: the node layer's default must match.
    makefile = (ROOT / "layers/node/Makefile").read_text()
    assert re.search(r"^NODE_LAYER_ARCHITECTURE \?= arm64$", makefile, re.M)


def test_full_checks_have_an_arm64_task_beside_the_x86_64_one(resources: dict[str, Any]) -> None:
    x86_64, arm64 = (
        resources[name]["Properties"]
        for name in ("CheckTaskDefinition", "CheckTaskDefinitionArm64")
    )
    assert x86_64.pop("RuntimePlatform") == {
        "CpuArchitecture": "X86_64",
        "OperatingSystemFamily": "LINUX",
    }
    assert arm64.pop("RuntimePlatform") == {
        "CpuArchitecture": "ARM64",
        "OperatingSystemFamily": "LINUX",
    }
    assert x86_64 == arm64, "the same task on either architecture"
    images = resources["ApiFunction"]["Properties"]["Environment"]["Variables"]["FORKHORSE_IMAGES"]
    entry = json.loads(images["Fn::Sub"])["default"]
    assert entry == {
        "reference": "${DefaultImageReference}",
        "architectures": "${DefaultImageArchitectures}",
        "taskDefinition": "${CheckTaskDefinition}",
        "arm64TaskDefinition": "${CheckTaskDefinitionArm64}",
    }
    parameter = load_template()["Parameters"]["DefaultImageArchitectures"]
    assert parameter["Default"] == "arm64,x86_64"  # container/Dockerfile builds both
    [run_task] = _allowed(_role_of(resources, "FullStartFunction"), "ecs:RunTask")
    assert run_task == [{"Ref": "CheckTaskDefinition"}, {"Ref": "CheckTaskDefinitionArm64"}]
