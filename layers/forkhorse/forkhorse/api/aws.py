"""AWS wiring for the API, authorizer, push and PromoteRun step handlers: DynamoDB, S3 git
and Step Functions (ReceiptRun executions, and a PromoteRun execution per promote).

Configuration comes from the environment: TABLE_NAME, BUCKET_NAME, STATE_MACHINE_ARN,
PUBLIC_URL, PROMOTE_STATE_MACHINE_ARN (needed to promote) and optionally
PROMOTE_WAIT_SECONDS.
"""

from __future__ import annotations

import os
from functools import cache

import boto3

from forkhorse.adapters.step_functions import StepFunctionsOrchestrator
from forkhorse.api.authorizer import OwnerPool
from forkhorse.ports.clock import SystemClock
from forkhorse.service import Service, ServiceSettings
from forkhorse.service.context import Context
from forkhorse.wiring.aws import git_host, table_store

# A queued promotion is presumed dead if its PromoteRun has not taken the lease by then:
# longer than Acquire's LeaseBusy retries in statemachine/promote.asl.json (a test checks).
# Once it holds the lease, the lease's expiry (the checks' timeouts plus a margin) is its
# deadline.
PROMOTE_ACQUIRE_SECONDS = 600


def aws_settings() -> ServiceSettings:
    """The same settings in the ApiFunction (which starts PromoteRuns) and its steps."""
    return ServiceSettings(
        public_url=os.environ["PUBLIC_URL"].rstrip("/"),
        promote_wait_seconds=float(os.environ.get("PROMOTE_WAIT_SECONDS", "20")),
        promote_poll_seconds=0.5,
        promote_job_seconds=PROMOTE_ACQUIRE_SECONDS,
    )


def aws_orchestrator() -> StepFunctionsOrchestrator:
    return StepFunctionsOrchestrator(
        boto3.client("stepfunctions"),
        os.environ["STATE_MACHINE_ARN"],
        promote_machine_arn=os.environ.get("PROMOTE_STATE_MACHINE_ARN", ""),
    )


def build_aws_service() -> Service:
    return Service(table_store(), git_host(), aws_orchestrator(), SystemClock(), aws_settings())


@cache
def promote_deps() -> Context:
    """The PromoteRun steps' ports: the service's own context, once per Lambda container."""
    return build_aws_service().context


def owner_pool() -> OwnerPool | None:
    """The deployment's Cognito pool, when the function is configured with one."""
    pool_id = os.environ.get("OWNER_USER_POOL_ID")
    client_id = os.environ.get("OWNER_CLIENT_ID")
    if not pool_id or not client_id:
        return None
    region = pool_id.split("_", 1)[0]
    issuer = f"https://cognito-idp.{region}.amazonaws.com/{pool_id}"
    return OwnerPool(boto3.client("cognito-idp", region_name=region), issuer, client_id)
