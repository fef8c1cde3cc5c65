"""List prices (us-east-1, on demand) and the cost model of one review, from counted calls.

The bench counts what a review makes AWS do (transitions, Lambda invocations, DynamoDB
request units); the model adds what moto cannot run: the Fargate task's life, each Lambda
invocation's duration, S3 and the HTTP API. docs/capacity.md prints the same figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Architecture = Literal["arm64", "x86_64"]

TRANSITION = 0.025 / 1000  # Step Functions Standard, per state transition
LAMBDA_REQUEST = 0.20 / 1_000_000
LAMBDA_GB_SECOND: dict[Architecture, float] = {"x86_64": 0.0000166667, "arm64": 0.0000133334}
FARGATE_VCPU_HOUR: dict[Architecture, float] = {"x86_64": 0.04048, "arm64": 0.03238}
FARGATE_GB_HOUR: dict[Architecture, float] = {"x86_64": 0.004445, "arm64": 0.00356}
DYNAMODB_WRITE_UNIT = 0.625 / 1_000_000
DYNAMODB_READ_UNIT = 0.125 / 1_000_000
S3_PUT = 0.005 / 1000
S3_GET = 0.0004 / 1000
HTTP_API_REQUEST = 1.00 / 1_000_000

# The model's assumptions (docs/capacity.md): a full check's task lives 4 minutes on 1 vCPU
# and 2 GB (template.yaml's CheckTaskDefinition); a step Lambda runs about half a second at
# 1 GB (the template's MemorySize); a review writes and reads its quick evidence in S3 once
# per quick check and takes a few API requests.
TASK_MINUTES = 4.0
TASK_VCPU = 1.0
TASK_GB = 2.0
INVOCATION_GB_SECONDS = 0.5
API_REQUESTS = 4


@dataclass(frozen=True)
class ReviewBill:
    step_functions: float
    lambda_: float
    fargate: float
    dynamodb: float
    s3_and_api: float

    @property
    def total(self) -> float:
        return self.step_functions + self.lambda_ + self.fargate + self.dynamodb + self.s3_and_api


def review_bill(
    *,
    transitions: int,
    invocations: int,
    write_units: float,
    read_units: float,
    quick_checks: int,
    full_checks: int,
    architecture: Architecture,
) -> ReviewBill:
    task_hours = full_checks * TASK_MINUTES / 60
    fargate = task_hours * (
        TASK_VCPU * FARGATE_VCPU_HOUR[architecture] + TASK_GB * FARGATE_GB_HOUR[architecture]
    )
    lambda_ = invocations * (
        LAMBDA_REQUEST + INVOCATION_GB_SECONDS * LAMBDA_GB_SECOND[architecture]
    )
    return ReviewBill(
        step_functions=transitions * TRANSITION,
        lambda_=lambda_,
        fargate=fargate,
        dynamodb=write_units * DYNAMODB_WRITE_UNIT + read_units * DYNAMODB_READ_UNIT,
        s3_and_api=quick_checks * (S3_PUT + S3_GET) + API_REQUESTS * HTTP_API_REQUEST,
    )
