"""The soak driver behind `make soak`: a real `forkhorse serve` on a loopback port with a
fresh home, mixed traffic from Locust users for a chosen time, a `kill -9` and restart on
the same home and port every few minutes, leak samples of the server, and a verdict.

Run as `python -m scripts.soak --seconds 600` from the repository root (see --help).
Writes a JSON report and prints a summary; exits 1 when the soak fails: any 5xx, any
refused connection outside a restart, any hostile check passing or approved, a metric
growing without bound (scripts/soak/leaks.py), or containers and processes left behind
once the load has stopped and running receipts have settled.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import gevent
from forkhorse.adapters.containers.images import DEFAULT_IMAGE, ImageRegistry, image_present
from forkhorse.adapters.containers.podman import PodmanContainerPort
from forkhorse.adapters.containers.podman_cli import Podman, PodmanFailed
from forkhorse.serve import private_home
from locust.env import Environment

from scripts.soak.leaks import Sample, judge
from scripts.soak.locustfile import TERMINAL, user_classes
from scripts.soak.sampling import BOUNDS, Sampler
from scripts.soak.tally import FAILING_KINDS, Restart, SoakContext
from scripts.soak.workload import WORKING_FILES, seed_project
from tests.integration.api.support import Client
from tests.support.resources import mounts_under
from tests.support.serve import ServeProcess, free_port

# Bounds on the soak itself.
MAX_SECONDS = 4 * 3600
MAX_AGENTS = 8
MAX_HOSTILE = 2
MIN_KILL_SECONDS = 30
DRAIN_SECONDS = 240  # after the load stops, for running receipts and their containers


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m scripts.soak", description=__doc__)
    parser.add_argument("--seconds", type=int, default=600, help="load duration (600)")
    parser.add_argument("--agents", type=int, default=3, help="working agents (3)")
    parser.add_argument("--hostile", type=int, default=1, help="hostile agents (1)")
    parser.add_argument("--owners", type=int, default=1, help="owners (1)")
    parser.add_argument("--kill-every", type=int, default=180, help="seconds between kills")
    parser.add_argument("--sample-every", type=float, default=5.0, help="seconds (5)")
    parser.add_argument(
        "--image-home",
        type=Path,
        required=True,
        help="a Forkhorse home whose images.json names a built default image",
    )
    parser.add_argument("--report", type=Path, default=Path("soak-report.json"))
    parser.add_argument("--keep", action="store_true", help="keep the temporary home")
    args = parser.parse_args(argv)
    if not 10 <= args.seconds <= MAX_SECONDS:
        parser.error(f"--seconds must be within 10..{MAX_SECONDS}")
    if not (1 <= args.agents <= MAX_AGENTS and 0 <= args.hostile <= MAX_HOSTILE):
        parser.error(f"--agents within 1..{MAX_AGENTS}, --hostile within 0..{MAX_HOSTILE}")
    if args.kill_every < MIN_KILL_SECONDS or args.owners not in (0, 1):
        parser.error(f"--kill-every at least {MIN_KILL_SECONDS}; --owners 0 or 1")
    return args


def built_default_image(image_home: Path) -> str:
    """The default image `make run` built (and recorded in its home), to reuse."""
    reference = ImageRegistry(image_home.resolve()).entries().get(DEFAULT_IMAGE)
    if reference is None or not image_present(Podman(), reference):
        raise SystemExit(
            f"No built default image in {image_home}: run "
            f"`forkhorse image --home {image_home} build default` (make soak does)."
        )
    return reference


class Supervisor:
    """Kills the server with SIGKILL every `every` seconds and restarts it on the same
    home and port, recording each restart window."""

    def __init__(self, server: ServeProcess, context: SoakContext, every: float) -> None:
        self.server, self.context, self.every = server, context, every
        self.epoch = 0

    def run(self, until: float) -> None:
        while time.monotonic() + self.every < until:
            gevent.sleep(self.every)
            restart = Restart(down_at=time.monotonic())
            self.context.restarts.append(restart)
            self.server.stop(signal.SIGKILL)
            self.epoch += 1
            try:
                self.server.start()
            except AssertionError as failed:  # a server that never returns excuses nothing
                self.context.violated(f"serve did not start after kill -9: {str(failed)[-500:]}")
                return
            finally:
                restart.up_at = time.monotonic()


def sample_loop(
    sampler: Sampler, server: ServeProcess, supervisor: Supervisor, every: float, into: list[Sample]
) -> None:
    started = time.monotonic()
    while True:
        pid = server.pid
        if pid is not None and not supervisor.context.restarting():
            try:
                values = sampler.sample(pid)
            except (OSError, PodmanFailed):  # the server died between reads, or podman failed
                values = None
            if values is not None and server.pid == pid:
                into.append(Sample(time.monotonic() - started, supervisor.epoch, values))
        gevent.sleep(every)


def settle(context: SoakContext, sampler: Sampler, server: ServeProcess) -> dict[str, Any]:
    """After the load: wait for running receipts to settle and their containers to go."""
    owner = Client(context.url, context.owner_token)
    deadline = time.monotonic() + DRAIN_SECONDS
    running, containers = -1, -1
    while time.monotonic() < deadline:
        running = sum(
            1
            for project in context.projects.values()
            for review in owner.state(project)["reviews"]
            if review["receipt"] and review["receipt"]["status"] not in TERMINAL
        )
        containers = sampler.containers()
        if running == 0 and containers == 0:
            break
        time.sleep(2)
    time.sleep(2)  # sandboxes and `podman start` exit just after their check ends
    return {
        "runningReceipts": running,
        "containers": sampler.containers(),
        "processes": sampler.processes(server.pid),
        "mounts": mounts_under(sampler.home),
    }


def final_receipts(context: SoakContext) -> dict[str, int]:
    """The current receipt of every review, by project and status, as /state shows it."""
    owner = Client(context.url, context.owner_token)
    tally: dict[str, int] = {}
    for key, project in context.projects.items():
        for review in owner.state(project)["reviews"]:
            status = review["receipt"]["status"] if review["receipt"] else "none"
            tally[f"{key} {status}"] = tally.get(f"{key} {status}", 0) + 1
    return dict(sorted(tally.items()))


def leak_table(samples: list[Sample]) -> dict[str, dict[str, float]]:
    table: dict[str, dict[str, float]] = {}
    for bound in BOUNDS:
        series = [s.values[bound.metric] for s in samples if bound.metric in s.values]
        if series:
            table[bound.metric] = {
                "first": series[0],
                "last": series[-1],
                "max": max(series),
                "ceiling": bound.ceiling,
            }
    return table


def request_table(environment: Environment) -> dict[str, Any]:
    stats = environment.stats
    total = stats.total
    return {
        "total": total.num_requests,
        "failures": total.num_failures,
        "p50Ms": total.get_response_time_percentile(0.5),
        "p95Ms": total.get_response_time_percentile(0.95),
        "routes": [
            {
                "route": entry.name,
                "requests": entry.num_requests,
                "failures": entry.num_failures,
                "p50Ms": entry.get_response_time_percentile(0.5),
                "p95Ms": entry.get_response_time_percentile(0.95),
            }
            for entry in sorted(stats.entries.values(), key=lambda e: -e.num_requests)
        ],
    }


def verdict(
    context: SoakContext, findings: list[Any], drained: dict[str, Any], samples: int
) -> list[str]:
    reasons = [
        f"{context.failures[kind]} {kind}" for kind in FAILING_KINDS if context.failures[kind]
    ]
    reasons += context.violations
    reasons += [f"{f.metric} {f.kind}: {f.detail}" for f in findings]
    if drained["runningReceipts"] != 0:
        reasons.append(f"{drained['runningReceipts']} receipts still running after the drain")
    left = {key: drained[key] for key in ("containers", "processes", "mounts") if drained[key]}
    if left:
        reasons.append(f"left behind after the drain: {left}")
    if samples == 0:
        reasons.append("no leak samples")
    if not context.outcomes:
        reasons.append("no receipt was seen: the load did not run")
    return reasons


def summary(report: dict[str, Any]) -> str:
    requests = report["requests"]
    lines = [
        f"Soak: {report['seconds']} s, {report['users']} users, "
        f"{len(report['restarts'])} kill -9 restarts",
        f"  requests: {requests['total']} (Locust failures {requests['failures']}), "
        f"p50 {requests['p50Ms']:.0f} ms, p95 {requests['p95Ms']:.0f} ms",
        f"  failures by kind: {report['failuresByKind'] or 'none'}",
        f"  receipts seen by outcome: {report['receiptsSeen']}",
        f"  receipts in /state at the end: {report['receiptsAtEnd']}",
        f"  promotions: {report['promotions']}",
        f"  restarts (s to serve again): {[r['recoverySeconds'] for r in report['restarts']]}",
        f"  leak samples ({report['leakSamples']}): first / last / max",
    ]
    for metric, row in report["leaks"].items():
        lines.append(
            f"    {metric:14} {row['first']:>14,.0f} {row['last']:>14,.0f} {row['max']:>14,.0f}"
        )
    lines.append(f"  after the drain: {report['drained']}")
    lines.append(f"  verdict: {report['verdict']}")
    lines += [f"    - {reason}" for reason in report["reasons"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s %(message)s")
    image = built_default_image(args.image_home)
    work = Path(tempfile.mkdtemp(prefix="forkhorse-soak-"))
    home, server_tmp = private_home(work / "home"), work / "server-tmp"
    server_tmp.mkdir()
    ImageRegistry(home).record(DEFAULT_IMAGE, image)
    port = free_port()
    server = ServeProcess(home, port, env={"TMPDIR": str(server_tmp)})
    try:
        server.start()
        owner_token = (home / "owner-token").read_text().strip()
        working = seed_project(server.url, owner_token, "soak-working", WORKING_FILES, work)
        hostile = seed_project(server.url, owner_token, "soak-hostile", {"README.md": "x\n"}, work)
        context = SoakContext(
            url=server.url,
            port=port,
            owner_token=owner_token,
            projects={"working": working[0], "hostile": hostile[0]},
            canonical_urls={"working": working[1], "hostile": hostile[1]},
            work=work,
            owner_decides=args.owners > 0,
        )
        report = soak(args, context, server, Sampler(home, server_tmp))
    finally:
        server.stop(signal.SIGKILL)
        PodmanContainerPort(home).cleanup_orphans(frozenset())
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    args.report.write_text(json.dumps(report, indent=2) + "\n")
    print(summary(report))
    print(f"  report: {args.report}")
    return 0 if report["verdict"] == "pass" else 1


def soak(
    args: argparse.Namespace, context: SoakContext, server: ServeProcess, sampler: Sampler
) -> dict[str, Any]:
    classes = user_classes(context, args.agents, args.hostile, args.owners)
    users = args.agents + args.hostile + args.owners
    environment = Environment(user_classes=classes, host=context.url)
    runner = environment.create_local_runner()
    supervisor = Supervisor(server, context, args.kill_every)
    samples: list[Sample] = []
    started = time.monotonic()
    until = started + args.seconds
    background = [
        gevent.spawn(supervisor.run, until),
        gevent.spawn(sample_loop, sampler, server, supervisor, args.sample_every, samples),
    ]
    runner.start(users, spawn_rate=users)
    gevent.sleep(max(0.0, until - time.monotonic()))
    runner.quit()
    background[0].join()  # a restart under way finishes
    background[1].kill()  # leak samples cover the load only, not the idle drain
    drained = settle(context, sampler, server)
    findings = judge(samples, BOUNDS)
    reasons = verdict(context, findings, drained, len(samples))
    # A user task that raised is a bug of the soak or an answer it could not read.
    task_errors = [f"{e['count']}x {e['msg']}" for e in runner.exceptions.values()]
    reasons += [f"task error: {error}" for error in task_errors]
    return {
        "seconds": args.seconds,
        "users": users,
        "killEverySeconds": args.kill_every,
        "requests": request_table(environment),
        "failuresByKind": dict(context.failures),
        "failureSamples": context.failure_samples,
        "receiptsSeen": dict(sorted(context.outcomes.items())),
        "receiptsAtEnd": final_receipts(context),
        "promotions": dict(sorted(context.promotions.items())),
        "violations": context.violations,
        "taskErrors": task_errors,
        "restarts": [
            {
                "at": round(r.down_at - started, 1),
                "recoverySeconds": round((r.up_at or r.down_at) - r.down_at, 1),
            }
            for r in context.restarts
        ],
        "leakSamples": len(samples),
        "leaks": leak_table(samples),
        "findings": [vars(f) for f in findings],
        "samples": [{"at": round(s.at, 1), "epoch": s.epoch, **s.values} for s in samples],
        "drained": drained,
        "verdict": "fail" if reasons else "pass",
        "reasons": reasons,
    }


if __name__ == "__main__":
    sys.exit(main())
