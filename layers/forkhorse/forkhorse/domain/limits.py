"""Every bound on what an agent can make Forkhorse spend, in one place.

Adapters and services import their limits from here; the README's security section lists
the same table. A limit that ends a check names itself in the check's `message`.
"""

from __future__ import annotations

from dataclasses import dataclass

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB


# --- HTTP API input ----------------------------------------------------------------------
@dataclass(frozen=True)
class ApiInputLimits:
    """What one API request body may be, checked before any handler sees it."""

    body_bytes: int = 4 * MIB
    json_depth: int = 64
    json_number_digits: int = 100
    json_string_chars: int = 4 * MIB


# --- Flow-Next receipts attached to a review ----------------------------------------------
@dataclass(frozen=True)
class ReviewReceiptLimits:
    per_review: int = 200
    receipt_bytes: int = 256 * KIB


# --- git smart HTTP -----------------------------------------------------------------------
@dataclass(frozen=True)
class GitLimits:
    """Enforced while a pack streams in or out, so memory stays bounded by one object."""

    request_bytes: int = 50 * MIB  # compressed bytes of one request body (local server)
    lambda_request_bytes: int = 4 * MIB  # API Gateway and Lambda payload ceiling
    object_bytes: int = 32 * MIB  # one inflated object
    push_inflated_bytes: int = 256 * MIB  # all inflated objects of one push
    push_objects: int = 100_000
    tree_entries: int = 10_000  # entries in one tree object
    delta_depth: int = 50
    ref_updates: int = 100  # ref updates in one push
    clone_inflated_bytes: int = 1 * GIB  # one clone or fetch, counted as it is sent


# --- quick-check snapshot capability ------------------------------------------------------
@dataclass(frozen=True)
class SnapshotLimits:
    """Per quick check. Every tree entry visited is charged, repeated subtrees included."""

    read_bytes: int = 2 * MIB
    listed_paths: int = 2_000
    operations: int = 10_000  # capability calls plus tree entries walked
    path_levels: int = 64


# --- the full-check export (checkout copied for a container) ------------------------------
@dataclass(frozen=True)
class ExportLimits:
    paths: int = 50_000
    bytes: int = 512 * MIB


# --- the quick sandbox (bubblewrap child) -------------------------------------------------
@dataclass(frozen=True)
class QuickSandboxLimits:
    deadline_seconds: float = 10.0
    cpu_seconds: int = 10
    address_space_bytes: int = 1 * GIB
    file_size_bytes: int = 16 * MIB
    tmpfs_bytes: int = 16 * MIB  # the only writable place; the root is read-only
    processes: int = 1
    open_files: int = 64
    output_bytes: int = 1 * MIB
    uid: int = 65534  # nobody: RLIMIT_NPROC binds a non-root uid


# --- full checks (podman locally, Fargate on AWS) -----------------------------------------
@dataclass(frozen=True)
class ContainerLimits:
    memory: str = "1g"
    pids: int = 256
    cpus: float = 1.0
    tmp_size: str = "256m"
    workspace_size: str = "1g"


# --- the local run queue --------------------------------------------------------------------
@dataclass(frozen=True)
class QueueLimits:
    workers: int = 2
    running_per_project: int = 2
    running_per_agent: int = 1
    queued_per_agent: int = 20


API_INPUT = ApiInputLimits()
REVIEW_RECEIPTS = ReviewReceiptLimits()
GIT = GitLimits()
SNAPSHOT = SnapshotLimits()
EXPORT = ExportLimits()
QUICK_SANDBOX = QuickSandboxLimits()
CONTAINER = ContainerLimits()
QUEUE = QueueLimits()
