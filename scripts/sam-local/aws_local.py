"""moto_server for `sam local`, and the template's table, bucket and state machines in it.

SAM runs each function in a container on podman's default bridge network (SAM's
`--docker-network host` only means "join no extra network"), where the host's loopback is
out of reach. So moto_server (the .venv's moto, on the local base image's Python) runs in a
container on that same bridge: the Lambda containers reach it at its bridge address, and this
driver reaches it on a published 127.0.0.1 port. Nothing listens beyond loopback.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import boto3
from base_image import IMAGE_TAG
from forkhorse.adapters.containers.podman_cli import ULIMIT_FLAGS, Podman

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # tests.support: the table exactly as template.yaml declares it

from tests.support.aws import create_table_from_template, load_template  # noqa: E402

TABLE = "forkhorse-sam-local"
BUCKET = "forkhorse-sam-local"
STATE_MACHINE = "ReceiptRun"
PROMOTE_STATE_MACHINE = "PromoteRun"
# The template's state machines: logical id -> (name in moto, definition).
STATE_MACHINES = {
    "ReceiptRunStateMachine": (STATE_MACHINE, "receipt_run.asl.json"),
    "PromoteRunStateMachine": (PROMOTE_STATE_MACHINE, "promote.asl.json"),
}
CLUSTER = "forkhorse-checks"  # env-vars.json: FORKHORSE_CLUSTER
MOTO_PORT = 5000
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "sam-local",
    "AWS_SECRET_ACCESS_KEY": "sam-local",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


@dataclass(frozen=True)
class Moto:
    host_url: str  # from this driver, on loopback
    container_url: str  # from the Lambda containers, on the bridge


def free_loopback_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


# moto's KMS signs a DIGEST message as AWS does (tests/support/moto_kms.py), so signatures
# made in the functions verify: the transparency log's self-check and the walk check them.
MOTO_MAIN = (
    "import sys, moto_kms; moto_kms.install(); "
    "from moto.server import main; sys.exit(main(sys.argv[1:]))"
)


@contextmanager
def moto_server(podman: Podman) -> Iterator[Moto]:
    """Run moto_server until the block ends; the container is removed by its id."""
    site_packages = Path(boto3.__file__).resolve().parents[1]
    patches = ROOT / "tests/support/moto_kms.py"
    port = free_loopback_port()
    container = podman.output(
        "run", "-d", "--rm", "--pull", "never", *ULIMIT_FLAGS,
        "-p", f"127.0.0.1:{port}:{MOTO_PORT}",
        "-v", f"{site_packages}:/opt/moto:ro", "-v", f"{patches}:/opt/patches/moto_kms.py:ro",
        "-e", "PYTHONPATH=/opt/moto:/opt/patches",
        "--entrypoint", "/var/lang/bin/python3.13", IMAGE_TAG,
        "-c", MOTO_MAIN,
        "-H", "0.0.0.0",  # noqa: S104 (inside its container, published on loopback)
        "-p", str(MOTO_PORT),
    ).strip()  # fmt: skip
    try:
        address = podman.output(
            "inspect", "--format", "{{.NetworkSettings.IPAddress}}", container
        ).strip()
        moto = Moto(f"http://127.0.0.1:{port}", f"http://{address}:{MOTO_PORT}")
        _wait_for(moto.host_url)
        print(f"sam-local: moto_server {container[:12]} at {moto.host_url}", flush=True)
        yield moto
    finally:
        podman.run("rm", "--force", "--time", "0", container)


def _wait_for(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/moto-api/", timeout=2):  # noqa: S310 (loopback)
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


# env-vars.json names the key by this alias, since its id is known only once moto makes it.
SIGNING_KEY_ALIAS = "alias/forkhorse-sam-local"
LOG_PUBLISHER = "LogPublisherFunction"  # env-vars.json: LOG_PUBLISHER_FUNCTION


def use_endpoint(moto: Moto) -> None:
    """This driver's own boto3 clients (and the host-side seeding) talk to moto."""
    os.environ.update(FAKE_CREDENTIALS)
    os.environ.update(
        AWS_ENDPOINT_URL=moto.host_url,
        TABLE_NAME=TABLE,
        BUCKET_NAME=BUCKET,
        STATE_MACHINE_ARN=state_machine_arn(STATE_MACHINE),
        PROMOTE_STATE_MACHINE_ARN=state_machine_arn(PROMOTE_STATE_MACHINE),
        PUBLIC_URL="https://sam-local.invalid",
        FORKHORSE_SIGNING_KEY=SIGNING_KEY_ALIAS,
        # The walk's git app (in this process) appends canonical's import to the log.
        LOG_PUBLISHER_FUNCTION=LOG_PUBLISHER,
    )
    # Lambda without Docker: the functions' asynchronous publish requests are accepted and
    # dropped (the driver runs LogPublisherFunction through start-lambda, as its schedule
    # would, since moto's Lambda cannot reach sam local's).
    config = json.dumps({"lambda": {"use_docker": False}}).encode()
    request = urllib.request.Request(f"{moto.host_url}/moto-api/config", data=config)  # noqa: S310
    with urllib.request.urlopen(request, timeout=10):  # noqa: S310 (loopback)
        pass


def state_machine_arn(name: str) -> str:
    return f"arn:aws:states:us-east-1:123456789012:stateMachine:{name}"


def create_resources() -> None:
    """The template's table, its bucket (versioned, as declared), the state machines, the
    cluster."""
    create_table_from_template(boto3.client("dynamodb"), TABLE)
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    bucket = load_template()["Resources"]["ForkhorseBucket"]["Properties"]
    s3.put_bucket_versioning(
        Bucket=BUCKET, VersioningConfiguration=bucket["VersioningConfiguration"]
    )
    # The template's SigningKey: finalize signs each record's attestation with it.
    kms = boto3.client("kms")
    key = kms.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")["KeyMetadata"]
    kms.create_alias(AliasName=SIGNING_KEY_ALIAS, TargetKeyId=key["KeyId"])
    # Full checks' cluster, so the poll step's lookups find it (its task does not exist).
    boto3.client("ecs").create_cluster(clusterName=CLUSTER)
    for logical_id, (name, file) in STATE_MACHINES.items():
        boto3.client("stepfunctions").create_state_machine(
            name=name,
            definition=_definition(logical_id, file),
            roleArn="arn:aws:iam::123456789012:role/sam-local",
        )


def _definition(logical_id: str, file: str) -> str:
    """The ASL with every DefinitionSubstitution filled in (moto_server never runs it)."""
    definition = (ROOT / "statemachine" / file).read_text(encoding="utf-8")
    for name in _substitutions(logical_id, definition):
        definition = definition.replace(f"${{{name}}}", _substituted_arn(name))
    assert "${" not in definition, f"{file}: a substitution the template does not declare"
    return definition


def _substituted_arn(name: str) -> str:
    """A nested machine's ARN for `<Name>StateMachineArn`, else a Lambda function's."""
    machine = name.removesuffix("StateMachineArn")
    if machine != name:
        return state_machine_arn(STATE_MACHINES[f"{machine}StateMachine"][0])
    return f"arn:aws:lambda:us-east-1:123456789012:function:{name}"


def _substitutions(logical_id: str, definition: str) -> set[str]:
    properties = load_template()["Resources"][logical_id]["Properties"]
    names = set(properties["DefinitionSubstitutions"])
    missing = {name for name in names if f"${{{name}}}" not in definition}
    assert not missing, f"unused substitutions: {missing}"
    return names


def read_json(path: Path) -> dict[str, object]:
    loaded: dict[str, object] = json.loads(path.read_text(encoding="utf-8"))
    return loaded
