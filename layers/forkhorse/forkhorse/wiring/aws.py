"""AWS's composition root: every adapter a Lambda function uses is built here, once per cold
start, from the function's typed settings (`wiring.settings`). Each function gets only what
its role allows: the runner steps Fargate, the quick check its sandbox, the API, git, push,
recovery and PromoteRun steps the service over DynamoDB, S3 git and Step Functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

import boto3
from botocore.config import Config

from forkhorse import console
from forkhorse.adapters.containers.fargate import FargateContainerPort, FargateSettings
from forkhorse.adapters.dynamodb import DynamoDbStore
from forkhorse.adapters.dynamodb.attestations import DynamoDbAttestations
from forkhorse.adapters.dynamodb.transparency import DynamoDbLogLedger
from forkhorse.adapters.dynamodb.waits import DynamoDbFullWaits
from forkhorse.adapters.events import EventBridgeBus
from forkhorse.adapters.evidence import S3EvidenceDrop
from forkhorse.adapters.git.s3 import S3GitHost
from forkhorse.adapters.lambda_log_publisher import LambdaLogPublisher
from forkhorse.adapters.s3_log import S3LogFiles
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
from forkhorse.service.log_events import GateLog
from forkhorse.service.log_publishing import LogPublishing, LogSelfCheck
from forkhorse.service.transparency import TransparencyLog
from forkhorse.tlog.verify import LogKey
from forkhorse.wiring.git_access import git_repo_lookup, git_token_resolver
from forkhorse.wiring.settings import (
    AwsSettings,
    ConsoleEnvironment,
    EventBusEnvironment,
    FargateEnvironment,
    LogEnvironment,
    OwnerPoolEnvironment,
    ServiceEnvironment,
    SettingsError,
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


def _log_ledger() -> DynamoDbLogLedger:
    return DynamoDbLogLedger(boto3.client("dynamodb"), AwsSettings.from_environ().table_name)


def _log_files() -> S3LogFiles:
    return S3LogFiles(_s3_client(), AwsSettings.from_environ().bucket_name)


def _log_origin(environment: LogEnvironment) -> str:
    return require(environment.origin, "LOG_ORIGIN", "name the transparency log")


def gate_log(evidence: Attestor | None = None) -> GateLog:
    """The transparency log where the function names its publisher (every function that
    appends); elsewhere none. The key a verifier pins only where the function serves it
    (the API), so the others never call KMS."""
    environment = LogEnvironment.from_environ()
    if environment.publisher_function is None:
        return GateLog()
    key = None
    if environment.key_id is not None:
        public = KmsSigner(boto3.client("kms"), environment.key_id).public_key
        key = LogKey(_log_origin(environment), public.keyval["public"])
    publisher = LambdaLogPublisher(boto3.client("lambda"), environment.publisher_function)
    log = TransparencyLog(_log_ledger(), _log_files(), publisher, SystemClock(), key)
    return GateLog(log, evidence)


@dataclass(frozen=True)
class LogPublisherDeps:
    publishing: LogPublishing
    check: LogSelfCheck
    # The repair's: the store, git and envelopes each intent names, and the log it appends to.
    context: Context


class _PublishesNext:
    """In the publisher itself an append (the repair's) asks for no publish: the
    function publishes right after its repair."""

    def request(self) -> None:
        """Nothing to ask for."""


def log_publisher() -> LogPublisherDeps:
    """LogPublisherFunction's: the ledger, the files and the KMS key that signs checkpoints;
    the self-check and the repair read the objects each entry names."""
    evidence = attestor()
    signer = evidence.signer
    if signer is None:
        raise SettingsError(
            "missing environment variable FORKHORSE_SIGNING_KEY: needed to sign the log"
        )
    key = LogKey(_log_origin(LogEnvironment.from_environ()), signer.public_key.keyval["public"])
    ledger, files, clock = _log_ledger(), _log_files(), SystemClock()
    gate = GateLog(TransparencyLog(ledger, files, _PublishesNext(), clock, key), evidence)
    check = LogSelfCheck(ledger, files, key, clock, gate.object_problem)
    context = build_aws_service(evidence, gate).context
    return LogPublisherDeps(LogPublishing(ledger, files, key, signer, clock), check, context)


def _evidence_drop() -> S3EvidenceDrop:
    return S3EvidenceDrop(_s3_client(), AwsSettings.from_environ().bucket_name)


@cache
def runner_deps() -> RunnerDeps:
    """The trusted steps: Store, git, Fargate and the evidence drop."""
    fargate = FargateSettings.from_environment(
        FargateEnvironment.from_environ().model_dump(by_alias=True)
    )
    git = git_host()
    evidence = attestor()
    return RunnerDeps(
        store=table_store(),
        git=git,
        containers=FargateContainerPort(fargate, boto3.client("ecs"), boto3.client("logs")),
        evidence=_evidence_drop(),
        clock=SystemClock(),
        checkout_source=published_archive(git),
        attestor=evidence,
        gate_log=gate_log(evidence),
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


def build_aws_service(evidence: Attestor | None = None, gate: GateLog | None = None) -> Service:
    """The service as the function's settings wire it; the log publisher gives its own
    attestor (the one holding the key) and log."""
    environment = ServiceEnvironment.from_environ()
    evidence = evidence or attestor()
    return Service(
        table_store(),
        git_host(),
        orchestrator(environment),
        SystemClock(),
        service_settings(environment),
        evidence,
        _ancestry(),
        gate or gate_log(evidence),
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
    pushes to forks announced on EventBridge, canonical's import appended to the log."""
    if resolve_token is None or lookup is None:
        service = build_aws_service()
        resolve_token = resolve_token or git_token_resolver(service)
        lookup = lookup or git_repo_lookup(service)
    bus = EventBusEnvironment.from_environ().event_bus_name
    events = EventBridgeBus(boto3.client("events"), bus)
    return GitHttpApp(git_host(), resolve_token, lookup, events, import_log=gate_log())


def execution_sweep() -> StepFunctionsOrchestrator:
    """What the recovery sweeper lists: both state machines' executions."""
    environment = ServiceEnvironment.from_environ()
    require(
        environment.promote_state_machine_arn,
        "PROMOTE_STATE_MACHINE_ARN",
        "sweep PromoteRun executions",
    )
    return orchestrator(environment)
