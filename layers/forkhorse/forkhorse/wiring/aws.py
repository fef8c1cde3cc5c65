"""AWS's adapters, wired once per Lambda cold start from the function's environment.

TABLE_NAME and BUCKET_NAME name the single table and the bucket; the Fargate settings come
from `FargateSettings.from_environment`. Each function gets only what its role allows.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING

import boto3
from botocore.config import Config

from forkhorse.adapters.containers.fargate import FargateContainerPort, FargateSettings
from forkhorse.adapters.dynamodb_store import DynamoDbStore
from forkhorse.adapters.evidence import S3EvidenceDrop
from forkhorse.adapters.git.s3 import S3GitHost
from forkhorse.adapters.sandbox.lambda_ import LambdaSandbox
from forkhorse.ports.clock import SystemClock
from forkhorse.runner.steps import QuickDeps, RunnerDeps, published_archive

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

FARGATE_POLL_SECONDS = 10


def _s3_client() -> S3Client:
    # SigV4 is what presigned snapshot URLs need.
    return boto3.client("s3", config=Config(signature_version="s3v4"))


def git_host(env: Mapping[str, str] = os.environ) -> S3GitHost:
    # Snapshots are read by SHA from S3; the DynamoDB client is used only for refs.
    return S3GitHost(
        _s3_client(),
        boto3.client("dynamodb"),
        bucket=env["BUCKET_NAME"],
        table=env["TABLE_NAME"],
    )


def table_store(env: Mapping[str, str] = os.environ) -> DynamoDbStore:
    return DynamoDbStore(boto3.client("dynamodb"), env["TABLE_NAME"])


@cache
def runner_deps() -> RunnerDeps:
    """The trusted steps: Store, git, Fargate and the evidence drop."""
    git = git_host()
    return RunnerDeps(
        store=table_store(),
        git=git,
        containers=FargateContainerPort(
            FargateSettings.from_environment(), boto3.client("ecs"), boto3.client("logs")
        ),
        evidence=S3EvidenceDrop(_s3_client(), os.environ["BUCKET_NAME"]),
        clock=SystemClock(),
        checkout_source=published_archive(git),
        poll_seconds=FARGATE_POLL_SECONDS,
    )


@cache
def quick_deps() -> QuickDeps:
    """The isolated quick-check Lambda: its sandbox, snapshots by SHA, the evidence drop."""
    return QuickDeps(
        sandbox=LambdaSandbox(),
        git=git_host(),
        evidence=S3EvidenceDrop(_s3_client(), os.environ["BUCKET_NAME"]),
    )
