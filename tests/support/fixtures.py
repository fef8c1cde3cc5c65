"""The shared fixtures of the layers that run real adapters (podman, bubblewrap, moto, a live
server, a browser). Each such layer's conftest imports them all from here; the unit layer
does not, so a unit session never imports moto, playwright or the local wiring."""

from tests.support.api_world import mocked_local_app
from tests.support.console import console, playwright
from tests.support.containers import busybox_ref, checkout, default_ref, podman, port, run_check
from tests.support.gitserve import aws_env, host, s3_host, serve_app, served
from tests.support.lambda_api import aws
from tests.support.live import advisory, required, server
from tests.support.promote import aws_world
from tests.support.runner import world

__all__ = [
    "advisory",
    "aws",
    "aws_env",
    "aws_world",
    "busybox_ref",
    "checkout",
    "console",
    "default_ref",
    "host",
    "mocked_local_app",
    "playwright",
    "podman",
    "port",
    "required",
    "run_check",
    "s3_host",
    "serve_app",
    "served",
    "server",
    "world",
]
