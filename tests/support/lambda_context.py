"""A Lambda context object, as the runtime passes one to every handler."""

from dataclasses import dataclass


@dataclass(frozen=True)
class FakeLambdaContext:
    function_name: str = "test-function"
    memory_limit_in_mb: int = 1024
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:test-function"
    aws_request_id: str = "00000000-0000-0000-0000-000000000000"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 60_000
