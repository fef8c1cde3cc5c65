"""Every bound on what an agent can make Forkhorse spend, in one place.

Adapters and services import their limits from here; docs/security.md lists the same
table. A limit that ends a check names itself in the check's `message`.
"""

from __future__ import annotations

from dataclasses import dataclass

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB


def format_bytes(size: int) -> str:
    """A limit as a message names it: "1 GiB", "16 MiB", "320 KiB" or "100 bytes"."""
    for unit, name in ((GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")):
        if size >= unit and size % unit == 0:
            return f"{size // unit} {name}"
    return f"{size} bytes"


# --- HTTP API input ----------------------------------------------------------------------
@dataclass(frozen=True)
class ApiInputLimits:
    """What one API request body may be, checked before any handler sees it
    (`forkhorse.domain.strict_json`, called by the API's guard locally and on AWS)."""

    body_bytes: int = 4 * MIB  # 413 past this; the local server never reads more
    json_depth: int = 64  # nested arrays and objects
    json_number_chars: int = 100  # one number literal, sign and exponent included


# --- Paginated listings: reviews and the ledger ------------------------------------------
@dataclass(frozen=True)
class PageLimits:
    """One page of `GET /projects/{id}/reviews` or `GET /projects/{id}/ledger`
    (`service/listings.py`): what one request can make the store read, whatever the
    project's history."""

    default_size: int = 50
    max_size: int = 100  # 400 past it
    cursor_chars: int = 512  # a longer cursor is a 400 before anything is decoded
    state_ledger: int = 50  # `/state` shows the newest entries; `ledgerNext` pages on


# --- Flow-Next receipts attached to a review ----------------------------------------------
@dataclass(frozen=True)
class ReviewReceiptLimits:
    """Per review, checked before a receipt is stored (`service/reviews.py`)."""

    per_review: int = 100  # receipts attached to one review (409 past it)
    receipt_bytes: int = 320 * KIB  # one canonical receipt: a full findings block fits (413)
    # Nested arrays and objects in one receipt (400 past it; a findings item's anchor is at
    # level 5). A stored receipt past any of these bounds is listed as unreadable.
    json_depth: int = 16
    review_bytes: int = 4 * MIB  # all receipts of one review, canonical bytes (409)
    cache_bytes: int = 64 * MIB  # receipts kept in memory per process, by digest (LRU)

    @property
    def parsing(self) -> ApiInputLimits:
        """How one receipt's canonical bytes are parsed, on the way in and out of the store."""
        return ApiInputLimits(body_bytes=self.receipt_bytes, json_depth=self.json_depth)


# --- Flow-Next receipt producer (`forkhorse review-findings|qa|gate|criteria|triage-skip`) -
@dataclass(frozen=True)
class FlowProducerLimits:
    """What one producer command reads from the working tree before it refuses (exit 2)."""

    review_text_bytes: int = 1 * MIB  # reviewer prose: the contract's input bound
    receipt_file_bytes: int = 2 * MIB  # one receipt JSON read back (findings alone is 256 KiB)
    history_entries: int = 1_000  # generations read beside one receipt path
    green_receipt_bytes: int = 64 * KIB  # one green receipt (real ones are ~250 bytes)
    green_dir_entries: int = 4_096  # files looked at in the green-receipts directory
    criteria_file_bytes: int = 256 * KIB  # `.flow/criteria.md`
    criteria_entries: int = 100  # standing criteria, as the reference caps them
    qa_scenarios: int = 500  # scenario rows in one QA receipt
    triage_paths: int = 10_000  # changed paths triage classifies; more is always a review


# --- git smart HTTP -----------------------------------------------------------------------
@dataclass(frozen=True)
class GitLimits:
    """Enforced while a pack streams in or out, so memory stays bounded by one object."""

    request_bytes: int = 50 * MIB  # one request body, on the wire and decompressed (413)
    lambda_request_bytes: int = 4 * MIB  # API Gateway and Lambda payload ceiling (413)
    # Receive-pack (`adapters/git/ingest/`): refused with git's `unpack <reason>`, or on
    # the side-band for the ref checks, before anything is stored or a ref is written.
    object_bytes: int = 32 * MIB  # one inflated object, from its header, while streaming
    push_inflated_bytes: int = 256 * MIB  # zlib output plus delta results of one push
    push_objects: int = 100_000  # objects in one pack (its header); also the most stored
    # objects one connectivity walk may read, and half the distinct objects a pack may name
    tree_entries: int = 10_000  # entries in one tree object, counted before it is parsed
    delta_depth: int = 50  # deltas in one chain (OFS while streaming, REF while resolving)
    ref_updates: int = 100  # ref updates in one push (pre-receive, before the pack is read)
    clone_inflated_bytes: int = 1 * GIB  # objects of one clone or fetch, counted as sent
    # Packs in one project's objects directory (git's gc.autoPackLimit): a push that leaves
    # more starts a background consolidation (`adapters/git/disk.py`), as every request
    # opens an index per pack.
    packs_per_project: int = 32


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
    """Per full check. Every path written is counted, repeated subtrees included; the
    export also stops at the check's own timeout."""

    paths: int = 50_000  # files, directories, links and submodules
    bytes: int = 512 * MIB  # file and link contents
    path_levels: int = 256  # one open directory per level while writing
    # The checkout's `.git` (`adapters/git/gitdir.py`): the commit's history, breadth first,
    # up to this many commits and this much raw object content (the commit's own tree
    # included); past either the `.git` is shallow and `git log` stops at the boundary.
    history_commits: int = 10_000
    history_bytes: int = 128 * MIB


# --- the quick sandbox (bubblewrap child) -------------------------------------------------
@dataclass(frozen=True)
class QuickSandboxLimits:
    """Per quick check: rlimits set by the harness, mount sizes set by bubblewrap."""

    deadline_seconds: float = 10.0
    cpu_seconds: int = 10
    address_space_bytes: int = 1 * GIB  # RLIMIT_AS; tmpfs pages are bounded by tmpfs_bytes
    file_size_bytes: int = 16 * MIB  # RLIMIT_FSIZE
    tmpfs_bytes: int = 16 * MIB  # /tmp, the only writable place; the root is read-only
    # RLIMIT_NPROC, counted per uid in the child's own user namespace: the interpreter and
    # its threads (seccomp already refuses new processes). It binds because uid is not root.
    processes: int = 8
    open_files: int = 64  # RLIMIT_NOFILE
    heap_bytes: int = 256 * MIB  # a JavaScript check's V8 heap (--max-old-space-size)
    output_bytes: int = 1 * MIB  # stdout and stderr together
    uid: int = 65534  # nobody, on the host too: RLIMIT_NPROC never binds root


# --- full checks (podman locally, Fargate on AWS) -----------------------------------------
@dataclass(frozen=True)
class ContainerLimits:
    """Per full check. /workspace and /tmp are tmpfs: their pages count against `memory`."""

    memory_bytes: int = 1 * GIB  # RAM plus everything written to /workspace and /tmp
    pids: int = 256
    cpus: float = 1.0
    tmp_bytes: int = 256 * MIB
    workspace_bytes: int = 512 * MIB  # writable on top of the checkout's own size
    inodes: int = 50_000  # new files in /tmp, and in /workspace on top of the checkout's
    open_files: int = 1024  # RLIMIT_NOFILE
    user_processes: int = 512  # RLIMIT_NPROC


# --- forks ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ForkLimits:
    """Each fork is a repository and a row `/state` lists, so an agent's are bounded."""

    per_agent: int = 16  # forks one agent may create in one project


FORKS = ForkLimits()


# --- the local run queue --------------------------------------------------------------------
@dataclass(frozen=True)
class QueueLimits:
    """Review runs are admitted per project and per agent; before-promote runs skip the
    queue and use reserved slots. Quick and full checks take slots of separate lanes."""

    running_per_project: int = 2  # active review runs of one project
    running_per_agent: int = 1  # active review runs of one agent, across projects
    running_total: int = 16  # active review runs in all (one thread each)
    queued_per_agent: int = 20  # waiting review runs of one agent; more are refused
    quick_slots: int = 2  # quick checks at once (bubblewrap children)
    full_slots: int = 2  # full checks at once (containers)
    # Full slots one project's review runs may hold at once: max(1, full_slots - 1), so with
    # two or more slots one is always out of a single project's reach and another project's
    # full check starts as soon as it is queued, however long the first project's checks are.
    full_slots_per_project: int = 1
    check_slots: int = 2  # quick and full checks at once, both lanes together
    promote_slots: int = 1  # extra quick, full and check slots only before-promote runs may use


# --- a graceful stop of the local server -----------------------------------------------------
@dataclass(frozen=True)
class StopLimits:
    """`forkhorse serve` on SIGTERM or SIGINT: it stops taking work, ends every run in flight
    as an infrastructure error that says the service stopped, removes their containers and
    unmounts their workspaces, then exits (`serve.py`, `runner/local/supervisor.py`)."""

    # Runs in flight get this long to notice and clean up after themselves (a full check
    # notices within 50 ms and its container goes at once; a quick check in its sandbox ends
    # by its own 10 s deadline). Then every container and workspace of the home is swept.
    drain_seconds: float = 15.0
    # From the signal to the exit, requests in flight (5 s) and the sweep included: what the
    # docs promise. Past it the process exits anyway; the next start sweeps, as after a crash.
    stop_seconds: float = 30.0


STOP = StopLimits()


# --- the local server's log --------------------------------------------------------------
@dataclass(frozen=True)
class LocalLogLimits:
    """`forkhorse serve` writes JSON log lines to `<home>/logs/`, rotated so that no amount
    of requests an agent makes can fill the disk (`forkhorse.observability`)."""

    file_bytes: int = 10 * MIB  # one log file, rotated past this
    backups: int = 5  # rotated files kept; older ones are deleted


# --- signed evidence (`forkhorse.attest`) --------------------------------------------------
@dataclass(frozen=True)
class AttestationLimits:
    """A receipt's envelope holds no logs or messages: with the checks' bounds (64 checks,
    64-character names) it is at most ~24 KB, well under `envelope_bytes`, which `forkhorse
    verify` applies to what it reads (and `key_file_bytes` to a key file)."""

    envelope_bytes: int = 256 * KIB
    key_file_bytes: int = 64 * KIB


# --- the receipt run -----------------------------------------------------------------------
# ReceiptRun's state-machine `TimeoutSeconds` (statemachine/receipt_run.asl.json; a template
# test holds them equal): no run outlives it, whatever its checks declare.
RECEIPT_RUN_TIMEOUT_SECONDS = 7200


API_INPUT = ApiInputLimits()
REVIEW_RECEIPTS = ReviewReceiptLimits()
PAGE = PageLimits()
FLOW_PRODUCER = FlowProducerLimits()
GIT = GitLimits()
SNAPSHOT = SnapshotLimits()
EXPORT = ExportLimits()
QUICK_SANDBOX = QuickSandboxLimits()
CONTAINER = ContainerLimits()
QUEUE = QueueLimits()
LOCAL_LOG = LocalLogLimits()
ATTESTATION = AttestationLimits()


# Each full check may use one CPU and CONTAINER.memory_bytes; a machine runs as many checks at
# once as it has cores and memory for, and an operator may set at most this many.
MAX_CONCURRENCY = 64


def default_concurrency(cores: int, memory_bytes: int) -> int:
    """How many checks a machine runs at once without oversubscribing it: one per core, and
    no more containers than fit its memory at their limit."""
    return max(1, min(cores, memory_bytes // CONTAINER.memory_bytes, MAX_CONCURRENCY))


def queue_for_concurrency(concurrency: int) -> QueueLimits:
    """The run queue of a machine that runs `concurrency` checks at once: that many in each
    lane and in all, and enough active runs (one project may use the whole machine) to fill
    them. Two gives the defaults."""
    return QueueLimits(
        running_per_project=max(QUEUE.running_per_project, concurrency),
        running_total=max(QUEUE.running_total, concurrency),
        quick_slots=concurrency,
        full_slots=concurrency,
        full_slots_per_project=max(1, concurrency - 1),
        check_slots=concurrency,
    )


# --- protected checks: the paths a check protects (`domain/checks.py`, `checks_change.py`) --
@dataclass(frozen=True)
class ProtectsLimits:
    """A check's `protects` globs, and what comparing them against canonical may cost. The
    comparison reads only trees that differ between canonical's head and the commit; past
    `compared_entries` it stops and counts as a change the owner must accept."""

    globs: int = 32  # declared globs of one check; more makes the checks file invalid
    glob_chars: int = 256  # one declared glob
    command_paths: int = 32  # paths a full check's command names, protected as literal paths
    # Tree entries read, both commits together: what one full check's export may walk of
    # the same commit, so a comparison never costs more than measuring one checkout.
    compared_entries: int = EXPORT.paths
    reasons_per_check: int = 20  # protected paths named one by one; the rest are counted


PROTECTS = ProtectsLimits()


# --- what one fork may keep stored (issue 28) ---------------------------------------------
@dataclass(frozen=True)
class ForkStorageLimits:
    """What one fork may accumulate across pushes, checked on every push to it
    (`adapters/git/quota.py`); a push past either is refused whole, nothing stored.

    A fork's bytes are the pack bytes its pushes added (as stored, completed thin packs
    included), each charged from the push until the garbage collection that runs after the
    grace period has passed; that collection then charges the fork what its refs still keep:
    the packed bytes of the objects reachable from the fork's refs and not from canonical's.
    Pushes younger than the grace period stay charged whole (their bytes stay on disk at
    least that long, whatever the refs do), so the charge never falls below what is stored.
    """

    bytes: int = 1 * GIB  # FORKHORSE_FORK_QUOTA_BYTES overrides it (tests)
    refs: int = 1_000  # branches and tags of one fork; FORKHORSE_FORK_QUOTA_REFS overrides
    ledger_entries: int = 256  # pushes remembered one by one; older ones are merged
    # How often `forkhorse serve` collects garbage (records, chunks, packs, fork charges);
    # FORKHORSE_GC_INTERVAL_SECONDS overrides it, FORKHORSE_GC_GRACE_SECONDS the grace.
    collect_every_seconds: int = 600
    collect_grace_seconds: int = 3600  # unreferenced data younger than this is kept


FORK_STORAGE = ForkStorageLimits()


# --- git history and negotiation walks, git request concurrency (issue 28) ------------------
@dataclass(frozen=True)
class GitWalkLimits:
    """What one question about git history may read, whatever an agent pushed.

    Ancestry (the gate's and promote's fast-forward check, `service/ancestry.py`): each
    commit's generation and parents are remembered per project once read, and each answer
    per (ancestor, descendant) pair, so a repeated question reads nothing and a new commit on
    top of an answered one reads only itself. A question that would read more new commits
    than `history_commits` keeps what it learned and is refused (409); asking again goes on.

    Negotiation (upload-pack, `githttp/upload.py`): a `have` naming a missing object or
    one that is not a commit is dropped after one lookup; the walk that decides whether a
    commit `have` is visible to the caller reads at most `negotiation_commits` commits, and
    at most `negotiation_haves` haves are considered. What is dropped only makes the pack
    larger, which the clone byte limit bounds.
    """

    history_commits: int = 100_000  # new commits one ancestry question may read (409)
    # Remembered commits one ancestry question may walk between the two (409, for good: a
    # commit that far above canonical's head is refused, whoever asks).
    history_steps: int = 500_000
    memo_commits: int = 200_000  # commits a process-memory ancestry memo keeps (AWS; LRU)
    # Rows (commits and answers) the home's ancestry memo keeps per project, about 60 bytes
    # each; past it the project's rows are cleared and read again as asked.
    memo_rows_per_project: int = 1_000_000
    negotiation_commits: int = 10_000  # commits one fetch's visibility walk may read
    negotiation_haves: int = 256  # haves one fetch request may name; the rest are dropped


@dataclass(frozen=True)
class GitConcurrencyLimits:
    """Git smart-HTTP requests one server works on at once (`githttp/admission.py`),
    fewer than `forkhorse serve`'s threads, so API requests and other projects always find
    one. Past a cap a request waits up to `wait_seconds` (at most `waiting` of them wait);
    otherwise it is answered 503 with `Retry-After`, having read nothing."""

    requests: int = 4  # git requests served at once, all projects together
    per_project: int = 2  # git requests of one project served at once
    waiting: int = 2  # git requests waiting for a slot, all projects together
    wait_seconds: float = 5.0
    retry_after_seconds: int = 2


GIT_WALKS = GitWalkLimits()
GIT_CONCURRENCY = GitConcurrencyLimits()


@dataclass(frozen=True)
class GitShallowLimits:
    """Shallow fetches (`githttp/shallow.py`): the walk that finds a `deepen`,
    `deepen-since` or `--unshallow` boundary reads at most `deepen_commits` commits; the
    commits it has reached but not read by then become the boundary, so a deep request is
    answered with a shallower history (fetching again deepens it further), never refused."""

    deepen_commits: int = 100_000


GIT_SHALLOW = GitShallowLimits()
