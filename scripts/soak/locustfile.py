"""The soak's Locust users: agents pushing over git smart HTTP and requesting reviews, an
owner approving and promoting, and a hostile agent whose checks spin, reach for the
network and exhaust memory, and whose requests are malformed.

`user_classes(context, ...)` binds the classes to one soak; `run.py` drives them with
Locust's library API. Every request names its route (ids replaced) so statistics group.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable, Collection
from typing import Any, ClassVar

from locust import HttpUser, User, between, task
from locust.exception import StopUser

from scripts.soak.tally import SERVER_ERROR, UNEXPECTED_STATUS, SoakContext
from scripts.soak.workload import Lane, hostile_variants
from tests.integration.api.support import Worktree

REQUEST_TIMEOUT = 60.0
RECEIPT_WAIT_SECONDS = 300.0
PROMOTION_WAIT_SECONDS = 180.0
POLL_SECONDS = 2.0
DECISION_WAIT_SECONDS = 90.0
MAX_JOINS = 5  # per user: each try creates an agent, a packet and a fork
TERMINAL = frozenset({"passed", "failed", "infrastructure-error", "timed-out"})
_SHA = re.compile(r"\b[0-9a-f]{40}\b")


class SoakUser(HttpUser):
    abstract = True
    soak: ClassVar[SoakContext]

    def call(
        self,
        method: str,
        path: str,
        name: str,
        expect: Collection[int],
        body: Any = None,
        token: str | None = None,
        data: str | None = None,
    ) -> tuple[int, Any]:
        """One request, recorded by Locust under `name`; a status outside `expect` is a
        failure of its kind (5xx, connection, unexpected status)."""
        headers = {"Authorization": f"Bearer {token or self.soak.owner_token}"}
        if method != "GET":
            headers["Content-Type"] = "application/json"
        with self.client.request(
            method,
            path,
            name=name,
            json=body,
            data=data,
            headers=headers,
            timeout=REQUEST_TIMEOUT,
            catch_response=True,
        ) as response:
            status = response.status_code or 0
            try:
                payload = response.json()
            except ValueError:
                payload = None
            if status in expect:
                response.success()
            elif status == 0:
                kind = self.soak.connection_failed(f"{name}: {response.error!r}")
                response.failure(f"{kind}: {response.error!r}")
            else:
                kind = SERVER_ERROR if status >= 500 else UNEXPECTED_STATUS
                self.soak.fail(kind, f"{name}: {status} {payload or response.text[:200]}")
                response.failure(f"{kind}: {status}")
        return status, payload

    def read_review(
        self, project: str, review_id: str, token: str | None = None
    ) -> dict[str, Any] | None:
        """One review by id, whether or not /state still lists it (None when the request
        failed)."""
        path = f"/projects/{project}/reviews/{review_id}"
        status, body = self.call("GET", path, "GET /review", {200}, token=token)
        return body["review"] if status == 200 else None

    def git(self, name: str, run: Callable[[], object]) -> bool:
        """A git command, recorded by Locust as a GIT request."""
        started = time.perf_counter()
        error: Exception | None = None
        try:
            run()
        except AssertionError as failed:  # Worktree raises it with git's stderr
            kind = self.soak.git_failed(name, str(failed))
            error = RuntimeError(f"{kind}: {failed}")
        self.environment.events.request.fire(
            request_type="GIT",
            name=name,
            response_time=(time.perf_counter() - started) * 1000,
            response_length=0,
            exception=error,
            context={},
        )
        return error is None


class LaneUser(SoakUser):
    """An agent on its own lane: joins a project (agent, membership, packet, claim, fork,
    clone), pushes over git smart HTTP, requests reviews and waits for their receipts."""

    abstract = True
    project_key: ClassVar[str]

    def on_start(self) -> None:
        self.lane: Lane | None = None
        self.joins = 0

    def join(self) -> Lane | None:
        project = self.soak.projects[self.project_key]
        name = self.soak.next_name(self.project_key)
        status, created = self.call("POST", "/agents", "POST /agents", {201}, {"name": name})
        if status != 201:
            return None
        agent, token = created["agent"]["id"], created["token"]
        members = f"/projects/{project}/members"
        if self.call("POST", members, "POST /members", {201}, {"agentId": agent})[0] != 201:
            return None
        packets = f"/projects/{project}/packets"
        status, packet = self.call("POST", packets, "POST /packets", {201}, {"title": name})
        if status != 201:
            return None
        packet_id = packet["packet"]["id"]
        claim = f"{packets}/{packet_id}/claim"
        if self.call("POST", claim, "POST /claim", {201}, token=token)[0] != 201:
            return None
        forks = f"/projects/{project}/forks"
        status, fork = self.call("POST", forks, "POST /forks", {201}, {"name": name}, token)
        if status != 201:
            return None
        tree = Worktree(self.soak.work / name)
        fork_url = fork["fork"]["cloneUrl"]
        if not self.git("git pull fork", lambda: tree.git(token, "pull", "-q", fork_url, "main")):
            return None
        canonical = self.soak.canonical_urls[self.project_key]
        return Lane(project, agent, token, packet_id, fork["fork"]["id"], fork_url, canonical, tree)

    def lane_or_join(self) -> Lane | None:
        """The user's lane; a join cut short (by a restart) starts over, a few times."""
        if self.lane is None:
            self.joins += 1
            if self.joins > MAX_JOINS:
                self.soak.fail(UNEXPECTED_STATUS, f"gave up joining after {MAX_JOINS} tries")
                raise StopUser()
            self.lane = self.join()
        return self.lane

    def push(self, lane: Lane, files: dict[str, str], message: str) -> str | None:
        commit = lane.tree.commit(files, message)
        pushed = self.git("git push fork", lambda: lane.tree.push(lane.fork_url, lane.token))
        return commit if pushed else None

    def request_review(self, lane: Lane, commit: str) -> str | None:
        body = {"packetId": lane.packet, "forkId": lane.fork_id, "commit": commit}
        path = f"/projects/{lane.project}/reviews"
        status, created = self.call("POST", path, "POST /reviews", {202}, body, lane.token)
        return created["review"]["id"] if status == 202 else None

    def review(self, lane: Lane, review_id: str) -> dict[str, Any] | None:
        """The review as the agent reads it (None when the request failed)."""
        return self.read_review(lane.project, review_id, lane.token)

    def wait_review(
        self, lane: Lane, review_id: str, settled: Callable[[dict[str, Any]], bool], wait: float
    ) -> dict[str, Any] | None:
        """Poll until `settled(review)`, at most `wait` seconds; the last review read."""
        deadline = time.monotonic() + wait
        last = None
        while time.monotonic() < deadline:
            last = self.review(lane, review_id) or last
            if last is not None and settled(last):
                return last
            time.sleep(POLL_SECONDS)
        return last

    def wait_receipt(self, lane: Lane, review_id: str) -> dict[str, Any] | None:
        """Wait for the review's receipt to settle; a receipt still running after
        RECEIPT_WAIT_SECONDS is a failure."""

        def settled(review: dict[str, Any]) -> bool:
            return review["receipt"] is None or review["receipt"]["status"] in TERMINAL

        review = self.wait_review(lane, review_id, settled, RECEIPT_WAIT_SECONDS)
        if review is None or not settled(review):
            self.soak.fail(UNEXPECTED_STATUS, f"receipt of {review_id} still running")
            return None
        if review["receipt"] is None:  # every soak commit declares checks
            self.soak.violated(f"review {review_id} of a commit with checks has no receipt")
        return review["receipt"]  # type: ignore[no-any-return]


class AgentUser(LaneUser):
    """Loops: merge canonical, commit a small change, push, request a review, wait for its
    receipt, and after a pass give the owner time to promote it."""

    abstract = True
    project_key = "working"
    wait_time = between(1, 3)

    def wait_decision(self, lane: Lane, review_id: str) -> None:
        """After a pass, give the owner time to promote before pushing on (as an agent
        waits for its packet to land), so promotes are not all stale by a newer push."""

        def decided(review: dict[str, Any]) -> bool:
            receipt = review["receipt"] or {}
            refused = receipt.get("trigger") == "before-promote" and receipt["status"] in (
                TERMINAL - {"passed"}
            )
            return review["promotion"] is not None or refused

        review = self.wait_review(lane, review_id, decided, DECISION_WAIT_SECONDS)
        landed = review is not None and review["promotion"] is not None
        self.soak.promotions[
            "agent saw its review " + ("promoted" if landed else "not promoted")
        ] += 1

    @task
    def push_and_review(self) -> None:
        lane = self.lane_or_join()
        if lane is None:
            return
        merge = ("pull", "-q", "--no-rebase", "--no-edit", lane.canonical_url, "main")
        if not self.git("git pull canonical", lambda: lane.tree.git(lane.token, *merge)):
            return
        name = lane.tree.path.name
        commit = self.push(lane, lane.working_change(name), f"{name} push {lane.pushes}")
        review = commit and self.request_review(lane, commit)
        if review:
            receipt = self.wait_receipt(lane, review)
            status = "none" if receipt is None else receipt["status"]
            self.soak.outcomes[f"working review-created {status}"] += 1
            if status == "passed" and self.soak.owner_decides:
                self.wait_decision(lane, review)


class HostileUser(LaneUser):
    """Pushes checks that must never pass, and sends requests that must be refused."""

    abstract = True
    project_key = "hostile"
    wait_time = between(3, 6)

    def on_start(self) -> None:
        super().on_start()
        self.variants = itertools.cycle(sorted(hostile_variants(self.soak.port).items()))

    @task(3)
    def hostile_check(self) -> None:
        lane = self.lane_or_join()
        if lane is None:
            return
        variant, files = next(self.variants)
        lane.pushes += 1
        commit = self.push(lane, {**files, "push.txt": f"{lane.pushes}\n"}, variant)
        review = commit and self.request_review(lane, commit)
        if review:
            receipt = self.wait_receipt(lane, review)
            status = "none" if receipt is None else receipt["status"]
            self.soak.outcomes[f"hostile {variant} {status}"] += 1
            if status == "passed":
                self.soak.violated(f"hostile {variant} check passed (review {review})")

    @task(2)
    def malformed_requests(self) -> None:
        lane = self.lane_or_join()
        if lane is None:
            return
        project = f"/projects/{lane.project}"
        reviews, token = f"{project}/reviews", lane.token
        body = {"packetId": lane.packet, "forkId": lane.fork_id, "commit": "0" * 40, "x": 1}
        self.call("POST", reviews, "hostile unknown field", {400}, body, token)
        self.call("POST", reviews, "hostile bad json", {400}, token=token, data='{"packetId":')
        settings = {"requireReceipt": False}
        self.call("PATCH", f"{project}/settings", "hostile agent as owner", {403}, settings, token)
        self.call("GET", "/projects/p-unknown/state", "hostile unknown project", {403, 404})
        forged = "not-a-token"  # a token no one was given
        self.call("GET", f"{project}/state", "hostile bad token", {401}, token=forged)


class OwnerUser(SoakUser):
    """Approves and promotes passing reviews; tries (and must fail) to approve hostile
    ones; reads receipt records."""

    abstract = True
    wait_time = between(2, 4)

    def state(self, key: str) -> dict[str, Any] | None:
        path = f"/projects/{self.soak.projects[key]}/state"
        status, state = self.call("GET", path, "GET /state", {200})
        return state if status == 200 else None

    @task(3)
    def approve_and_promote(self) -> None:
        state = self.state("working")
        if state is None:
            return
        heads = {fork["id"]: fork["head"] for fork in state["forks"]}
        ready = [
            r
            for r in state["reviews"]
            if r["receipt"] is not None
            and r["receipt"]["status"] == "passed"
            and r["receipt"]["trigger"] == "review-created"
            and r["approval"] is None
            and heads.get(r["forkId"]) == r["commit"]
        ]
        if not ready:
            return
        review = ready[-1]
        project = self.soak.projects["working"]
        path = f"/projects/{project}/reviews/{review['id']}"
        body = {"commit": review["commit"]}
        status, _ = self.call("POST", f"{path}/approve", "POST /approve", {200, 409}, body)
        if status != 200:
            self.soak.promotions[f"approve {status}"] += 1
            return
        answered = {200, 202, 409}
        status, answer = self.call("POST", f"{path}/promote", "POST /promote", answered, body)
        deadline = time.monotonic() + PROMOTION_WAIT_SECONDS
        while status in (0, 202) and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
            status, answer = self.call("GET", f"{path}/promotion", "GET /promotion", answered)
        error = (answer or {}).get("error", "") if status == 409 else ""
        self.soak.promotions[f"promote {status} {_SHA.sub('<sha>', error)}".strip()] += 1
        after = self.read_review(project, review["id"])
        if after is not None:
            receipt = after["receipt"]
            if receipt and receipt["trigger"] == "before-promote":
                self.soak.outcomes[f"working before-promote {receipt['status']}"] += 1

    @task(1)
    def approve_hostile(self) -> None:
        state = self.state("hostile")
        if state is None:
            return
        settled = [
            r
            for r in state["reviews"]
            if r["receipt"] is not None and r["receipt"]["status"] in TERMINAL
        ]
        if not settled:
            return
        review = settled[-1]
        path = f"/projects/{self.soak.projects['hostile']}/reviews/{review['id']}/approve"
        status, _ = self.call(
            "POST", path, "POST /approve hostile", {409}, {"commit": review["commit"]}
        )
        if status == 200:
            self.soak.violated(f"hostile review {review['id']} was approved")

    @task(1)
    def read_receipt(self) -> None:
        state = self.state("working")
        if state is None or not state["reviews"]:
            return
        review = state["reviews"][-1]
        path = f"/projects/{self.soak.projects['working']}/reviews/{review['id']}/receipt"
        self.call("GET", path, "GET /receipt", {200, 404})


def user_classes(context: SoakContext, agents: int, hostile: int, owners: int) -> list[type[User]]:
    """The user classes of one soak, each with its fixed number of users."""
    counts = ((AgentUser, agents), (HostileUser, hostile), (OwnerUser, owners))
    return [
        type(base.__name__, (base,), {"soak": context, "fixed_count": count, "weight": 1})
        for base, count in counts
        if count > 0
    ]
