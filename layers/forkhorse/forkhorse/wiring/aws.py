"""AWS's composition root: every adapter a Lambda function uses is built here, once per cold
start, from the function's typed settings (`wiring.settings`). Each function gets only what
its role allows: the runner steps Fargate, the quick check its sandbox, the API, git, push,
recovery and PromoteRun steps the service over DynamoDB, S3 git and Step Functions.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

import boto3
from botocore.config import Config

from forkhorse import console
from forkhorse.adapters.containers.fargate import FargateContainerPort, FargateSettings
from forkhorse.adapters.dynamodb import DynamoDbStore
from forkhorse.adapters.dynamodb.attestations import DynamoDbAttestations
from forkhorse.adapters.dynamodb.waits import DynamoDbFullWaits
from forkhorse.adapters.events import EventBridgeBus
from forkhorse.adapters.evidence import S3EvidenceDrop
from forkhorse.adapters.git.s3 import S3GitHost
from forkhorse.adapters.sandbox.lambda_ import LambdaSandbox
from forkhorse.adapters.signing.kms import KmsSigner
from forkhorse.adapters.step_functions import StepFunctionsCallbacks, StepFunctionsOrchestrator
from forkhorse.api.app import ForkhorseApi
from forkhorse.api.authorizer import OwnerPool
from forkhorse.attest.attestor import Attestor
from forkhorse.githttp.http import GitHttpApp, RepoLookup, TokenResolver
from forkhorse.ports.clock import SystemClock
from forkhorse.runner.workflow.callbacks import CallbackDeps
from forkhorse.runner.workflow.steps import QuickDeps, RunnerDeps, published_archive
from forkhorse.service.ancestry import GenerationAncestry, MemoryAncestryMemo
from forkhorse.service.context import Context
from forkhorse.service.facade import Service, ServiceSettings
from forkhorse.wiring.git_access import git_repo_lookup, git_token_resolver
from forkhorse.wiring.settings import (
    AwsSettings,
    ConsoleEnvironment,
    EventBusEnvironment,
    FargateEnvironment,
    OwnerPoolEnvironment,
    ServiceEnvironment,
    SigningEnvironment,
    require,
)

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

# A queued promotion is presumed dead if its PromoteRun has not taken the lease by then:
# longer than Acquire's LeaseBusy retries in statemachine/promote.asl.json (a test checks).
# Once it holds the lease, the lease's expiry (the checks' timeouts plus a margin) is its
# deadline.
PROMOTE_ACQUIRE_SECONDS = 600


def _s3_client() -> S3Client:
    # SigV4 is what presigned snapshot URLs need.
    return boto3.client("s3", config=Config(signature_version="s3v4"))


def git_host() -> S3GitHost:
    # Snapshots are read by SHA from S3; the DynamoDB client is used only for refs.
    settings = AwsSettings.from_environ()
    return S3GitHost(
        _s3_client(),
        boto3.client("dynamodb"),
        bucket=settings.bucket_name,
        table=settings.table_name,
    )


def table_store() -> DynamoDbStore:
    return DynamoDbStore(boto3.client("dynamodb"), AwsSettings.from_environ().table_name)


def attestor() -> Attestor:
    """Envelopes and keys in the table; a signer only where the function names the key."""
    store = DynamoDbAttestations(boto3.client("dynamodb"), AwsSettings.from_environ().table_name)
    key = SigningEnvironment.from_environ().signing_key
    return Attestor(store, None if key is None else KmsSigner(boto3.client("kms"), key))


def _evidence_drop() -> S3EvidenceDrop:
    return S3EvidenceDrop(_s3_client(), AwsSettings.from_environ().bucket_name)


@cache
def runner_deps() -> RunnerDeps:
    """The trusted steps: Store, git, Fargate and the evidence drop."""
    fargate = FargateSettings.from_environment(
        FargateEnvironment.from_environ().model_dump(by_alias=True)
    )
    git = git_host()
    return RunnerDeps(
        store=table_store(),
        git=git,
        containers=FargateContainerPort(fargate, boto3.client("ecs"), boto3.client("logs")),
        evidence=_evidence_drop(),
        clock=SystemClock(),
        checkout_source=published_archive(git),
        attestor=attestor(),
    )


@cache
def callback_deps() -> CallbackDeps:
    """FullStart, FullStopped and FullOvertime: the trusted steps, the held task tokens and
    Step Functions to answer them."""
    waits = DynamoDbFullWaits(boto3.client("dynamodb"), AwsSettings.from_environ().table_name)
    callbacks = StepFunctionsCallbacks(boto3.client("stepfunctions"))
    return CallbackDeps(runner_deps(), waits, callbacks)


@cache
def quick_deps() -> QuickDeps:
    """The isolated quick-check Lambda: its sandbox, snapshots by SHA, the evidence drop."""
    return QuickDeps(sandbox=LambdaSandbox(), git=git_host(), evidence=_evidence_drop())


def service_settings(environment: ServiceEnvironment) -> ServiceSettings:
    """The same settings in the ApiFunction (which starts PromoteRuns) and its steps."""
    return ServiceSettings(
        public_url=environment.public_url.rstrip("/"),
        promote_wait_seconds=environment.promote_wait_seconds,
        promote_poll_seconds=0.5,
        promote_job_seconds=PROMOTE_ACQUIRE_SECONDS,
    )


def orchestrator(environment: ServiceEnvironment) -> StepFunctionsOrchestrator:
    return StepFunctionsOrchestrator(
        boto3.client("stepfunctions"),
        environment.state_machine_arn,
        promote_machine_arn=environment.promote_state_machine_arn,
    )


def build_aws_service() -> Service:
    environment = ServiceEnvironment.from_environ()
    return Service(
        table_store(),
        git_host(),
        orchestrator(environment),
        SystemClock(),
        service_settings(environment),
        attestor(),
        _ancestry(),
    )


@cache
def _ancestry() -> GenerationAncestry:
    """One memo per Lambda container, shared by every invocation it serves."""
    return GenerationAncestry(MemoryAncestryMemo())


def build_aws_api() -> ForkhorseApi:
    """The ApiFunction's routes behind the one Lambda authorizer, whose principal it trusts;
    the console signs owners in with the deployment's Cognito pool."""
    sign_in = ConsoleEnvironment.from_environ()
    return ForkhorseApi(
        build_aws_service(),
        trust_authorizer=True,
        sign_in=console.config(sign_in.cognito_domain, sign_in.cognito_client_id),
    )


@cache
def promote_deps() -> Context:
    """The PromoteRun steps' ports: the service's own context, once per Lambda container."""
    return build_aws_service().context


def owner_pool() -> OwnerPool | None:
    """The deployment's Cognito pool, when the function is configured with one."""
    environment = OwnerPoolEnvironment.from_environ()
    pool_id, client_id = environment.user_pool_id, environment.client_id
    if not pool_id or not client_id:
        return None
    region = pool_id.split("_", 1)[0]
    issuer = f"https://cognito-idp.{region}.amazonaws.com/{pool_id}"
    return OwnerPool(boto3.client("cognito-idp", region_name=region), issuer, client_id)


def git_http_app(
    resolve_token: TokenResolver | None = None, lookup: RepoLookup | None = None
) -> GitHttpApp:
    """The GitHttpFunction's app: the service's tokens and access facts unless given (tests),
    and pushes to forks announced on EventBridge."""
    if resolve_token is None or lookup is None:
        service = build_aws_service()
        resolve_token = resolve_token or git_token_resolver(service)
        lookup = lookup or git_repo_lookup(service)
    bus = EventBusEnvironment.from_environ().event_bus_name
    events = EventBridgeBus(boto3.client("events"), bus)
    return GitHttpApp(git_host(), resolve_token, lookup, events)


def execution_sweep() -> StepFunctionsOrchestrator:
    """What the recovery sweeper lists: both state machines' executions."""
    environment = ServiceEnvironment.from_environ()
    require(
        environment.promote_state_machine_arn,
        "PROMOTE_STATE_MACHINE_ARN",
        "sweep PromoteRun executions",
    )
    return orchestrator(environment)
