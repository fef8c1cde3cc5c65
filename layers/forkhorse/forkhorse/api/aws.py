"""AWS wiring for the API, authorizer, push and promote handlers: DynamoDB, S3 git, Step
Functions, and promote jobs in the PromoteFunction.

Configuration comes from the environment: TABLE_NAME, BUCKET_NAME, STATE_MACHINE_ARN,
PUBLIC_URL, PROMOTE_FUNCTION_NAME (needed to promote) and optionally PROMOTE_WAIT_SECONDS.
"""

from __future__ import annotations

import os
from datetime import timedelta

import boto3

from forkhorse.adapters.dynamodb_store import DynamoDbStore
from forkhorse.adapters.jobs import LambdaPromoteJobs
from forkhorse.adapters.step_functions import StepFunctionsOrchestrator
from forkhorse.api.authorizer import OwnerPool
from forkhorse.ports.clock import SystemClock
from forkhorse.ports.store import Store
from forkhorse.service import Service, ServiceSettings
from forkhorse.wiring.aws import git_host


def aws_store() -> Store:
    return DynamoDbStore(boto3.client("dynamodb"), os.environ["TABLE_NAME"])


# A promote job runs in the PromoteFunction, whose timeout is the Lambda maximum. Its lease
# wait and before-promote run fit inside that timeout, the lease outlives it, and the job's
# deadline also covers the event's time in Lambda's async queue (its maximum event age).
PROMOTE_FUNCTION_TIMEOUT_SECONDS = 900
PROMOTE_EVENT_MAX_AGE_SECONDS = 60
PROMOTE_RUN_TIMEOUT_SECONDS = 600
PROMOTE_LEASE_WAIT_SECONDS = 240


def aws_settings() -> ServiceSettings:
    """The same settings in the ApiFunction (which queues jobs) and the PromoteFunction."""
    return ServiceSettings(
        public_url=os.environ["PUBLIC_URL"].rstrip("/"),
        promote_wait_seconds=float(os.environ.get("PROMOTE_WAIT_SECONDS", "20")),
        promote_poll_seconds=0.5,
        promote_run_timeout_seconds=PROMOTE_RUN_TIMEOUT_SECONDS,
        lease_wait_seconds=PROMOTE_LEASE_WAIT_SECONDS,
        lease_ttl=timedelta(seconds=PROMOTE_FUNCTION_TIMEOUT_SECONDS + 60),
        promote_job_seconds=PROMOTE_FUNCTION_TIMEOUT_SECONDS + PROMOTE_EVENT_MAX_AGE_SECONDS,
    )


def build_aws_service() -> Service:
    git = git_host()
    orchestrator = StepFunctionsOrchestrator(
        boto3.client("stepfunctions"), os.environ["STATE_MACHINE_ARN"]
    )
    jobs = LambdaPromoteJobs(boto3.client("lambda"), os.environ.get("PROMOTE_FUNCTION_NAME", ""))
    return Service(aws_store(), git, orchestrator, SystemClock(), aws_settings(), jobs=jobs)


def owner_pool() -> OwnerPool | None:
    """The deployment's Cognito pool, when the function is configured with one."""
    pool_id = os.environ.get("OWNER_USER_POOL_ID")
    client_id = os.environ.get("OWNER_CLIENT_ID")
    if not pool_id or not client_id:
        return None
    region = pool_id.split("_", 1)[0]
    issuer = f"https://cognito-idp.{region}.amazonaws.com/{pool_id}"
    return OwnerPool(boto3.client("cognito-idp", region_name=region), issuer, client_id)
