"""API benchmarks, in process (no sockets): `GET /state` over 1,000 reviews, its curve from
10 to 10,000 reviews on SQLite and on moto's DynamoDB, and over a 1,000-entry ledger, and a
review request's time to its 202. Each prints its figure and a ratio against a bare
baseline."""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from forkhorse.adapters.containers.mock import MockContainerPort
from forkhorse.adapters.dynamodb import DynamoDbStore
from forkhorse.adapters.sandbox.mock import MockSandbox
from forkhorse.domain.limits import PAGE
from forkhorse.service.facade import Service
from forkhorse.wiring.local import LocalApp, build_local_runtime
from moto.dynamodb import models as moto_dynamodb_models
from moto.dynamodb.models.table import Table

from tests.support.api_world import ApiWorld, api_event, api_world, local_api_world
from tests.support.aws import create_table_from_template
from tests.support.aws_usage import counting_aws_calls
from tests.support.bench import BenchFigures
from tests.support.moto_atomic import atomic_mock_aws
from tests.support.store import promote_done

REVIEWS = 1_000
# A project's open work: its reviews iterate on this many packets, so /state shows this
# many reviews however long the history grows.
OPEN_PACKETS = 10
CURVE = (10, 100, 1_000, 10_000)
SHORT_LEDGER = 2 * PAGE.state_ledger
pytestmark = pytest.mark.bench


def _timed(action: Any, repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return samples


def _median_ms(action: Callable[[], object], repeat: int) -> float:
    return statistics.median(_timed(action, repeat)) * 1000


def _grow(world: ApiWorld, packets: list[str], have: int, want: int) -> None:
    """Add reviews, spread over `packets` in turn, until the project has `want`."""
    for index in range(have, want):
        packet = packets[index % len(packets)]
        world.seed_reviews(1, packet=packet, prefix=f"review-{index:05d}")


def _state(world: ApiWorld) -> Callable[[], object]:
    event = api_event("GET", f"/projects/{world.ids['project']}/state", world.owner_token)

    def get() -> object:
        response = world.api.handle(event)
        assert response["statusCode"] == 200, response
        return response

    return get


def test_state_with_1000_reviews(mocked_local_app: LocalApp, bench_figures: BenchFigures) -> None:
    """1,000 reviews of 10 open packets: /state shows the 10 active ones."""
    world = local_api_world(mocked_local_app)
    packets = [world.ids["packet"]] + [world.new_packet(f"p{i}") for i in range(1, OPEN_PACKETS)]
    _grow(world, packets, 0, REVIEWS)
    store = world.service.context.store
    get_state = _state(world)
    get_state()
    median = _median_ms(get_state, 20)
    bare = _median_ms(lambda: store.list_reviews(world.ids["project"]), 20)
    print(
        f"\nGET /state, {REVIEWS} reviews ({OPEN_PACKETS} active): median {median:.1f} ms per"
        f" request; Store.list_reviews alone {bare:.1f} ms (ratio {median / bare:.2f}x)"
    )
    bench_figures.record("state-ratio", median / bare)
    bench_figures.record("state-ms", median)
    assert median < 2000


def test_state_over_a_long_ledger(mocked_local_app: LocalApp) -> None:
    """10 active reviews promoted 1,000 times in all: /state shows the newest 50 entries and
    each review's latest promotion, so it costs what it did at 100 promotions (both show 50
    entries; fewer promotions would show fewer)."""
    world = local_api_world(mocked_local_app)
    packets = [world.ids["packet"]] + [world.new_packet(f"p{i}") for i in range(1, OPEN_PACKETS)]
    _grow(world, packets, 0, OPEN_PACKETS)
    store, project = world.service.context.store, world.ids["project"]
    reviews = [review.id for review in store.list_active_reviews(project)]
    now = world.service.context.clock.now()
    medians: dict[int, float] = {}
    for index in range(REVIEWS):
        review, at = reviews[index % OPEN_PACKETS], now + timedelta(seconds=index)
        promote_done(store, project, review, f"p{index}", f"{index:040x}", at)
        if index + 1 in (SHORT_LEDGER, REVIEWS):
            medians[index + 1] = _median_ms(_state(world), 20)
    short, long = medians[SHORT_LEDGER], medians[REVIEWS]
    print(
        f"\nGET /state, {OPEN_PACKETS} active reviews: median {short:.1f} ms after "
        f"{SHORT_LEDGER} promotions, {long:.1f} ms after {REVIEWS} (ratio {long / short:.2f}x)"
    )
    assert long < 2000


def test_state_when_every_review_is_active(mocked_local_app: LocalApp) -> None:
    """The worst case, for the record: 1,000 packets with one review each, all active."""
    world = local_api_world(mocked_local_app)
    packets = [world.ids["packet"]] + [world.new_packet(f"p{i}") for i in range(1, REVIEWS)]
    _grow(world, packets, 0, REVIEWS)
    store = world.service.context.store
    median = _median_ms(_state(world), 10)
    bare = _median_ms(lambda: store.list_reviews(world.ids["project"]), 10)
    print(
        f"\nGET /state, {REVIEWS} reviews all active: median {median:.1f} ms; "
        f"Store.list_reviews alone {bare:.1f} ms (ratio {median / bare:.2f}x)"
    )
    assert median < 5000


class _NoTableSnapshots:
    """moto deep-copies the whole table before each transaction, to roll it back if a
    condition fails; seeding 10,000 reviews that way is quadratic. The bench's seeding
    never fails a condition (it asserts each write), so the tables go uncopied."""

    @staticmethod
    def deepcopy(value: Any) -> Any:
        return value if isinstance(value, Table) else copy.deepcopy(value)


@pytest.fixture
def dynamodb_world(
    tmp_path: Path, aws_env: None, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ApiWorld]:
    """The service over moto's DynamoDB table (local git, mock sandbox and containers)."""
    monkeypatch.setattr(moto_dynamodb_models, "copy", _NoTableSnapshots)
    runtime = build_local_runtime(tmp_path, sandbox=MockSandbox(), containers=MockContainerPort())
    try:
        with atomic_mock_aws(monkeypatch):
            client = boto3.client("dynamodb", region_name="us-east-1")
            store = DynamoDbStore(client, create_table_from_template(client))
            service = Service(store, runtime.git, runtime.supervisor, runtime.deps.clock)
            yield api_world(service, runtime.git)
    finally:
        runtime.close()


@pytest.mark.timeout(1800)  # seeding 10,000 reviews in moto on a loaded machine
@pytest.mark.parametrize("backend", ["sqlite", "dynamodb"])
def test_state_curve(
    backend: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/state from 10 to 10,000 reviews of 10 open packets, against listing every review:
    /state stays flat while the history grows. On DynamoDB, also the read units each uses
    (what AWS bills and throttles): moto's query scans its whole table whatever the key, so
    its times grow with the table even where DynamoDB's would not."""
    fixture = "dynamodb_world" if backend == "dynamodb" else "mocked_local_app"
    found = request.getfixturevalue(fixture)
    world = found if isinstance(found, ApiWorld) else local_api_world(found)
    packets = [world.ids["packet"]] + [world.new_packet(f"p{i}") for i in range(1, OPEN_PACKETS)]
    store, project = world.service.context.store, world.ids["project"]
    print(f"\nGET /state curve on {backend} ({OPEN_PACKETS} active reviews)")
    print("reviews | /state (ms) | list_reviews (ms) |  ratio | read units", flush=True)
    have = 0
    for size in CURVE:
        _grow(world, packets, have, size)
        have = size
        repeat = 10 if size <= 1_000 else 3
        state = _median_ms(_state(world), repeat)
        every = _median_ms(lambda: store.list_reviews(project), repeat)
        units = ""
        if backend == "dynamodb":
            state_units = _read_units(_state(world), monkeypatch)
            every_units = _read_units(lambda: store.list_reviews(project), monkeypatch)
            units = f" | {state_units:g} vs {every_units:g}"
        line = f"{size:>7} | {state:>11.1f} | {every:>17.1f} | {state / every:>5.2f}x{units}"
        print(line, flush=True)


def _read_units(action: Callable[[], object], monkeypatch: pytest.MonkeyPatch) -> float:
    with counting_aws_calls(monkeypatch) as usage:
        action()
    return usage.read_units


def test_review_request_time_to_202(mocked_local_app: LocalApp) -> None:
    world = local_api_world(mocked_local_app)
    agent_token, ids = world.agent_token, world.ids
    body = (
        f'{{"packetId":"{ids["packet"]}","forkId":"{ids["fork"]}","commit":"{ids["commit"]}"}}'
    ).encode()
    path = f"/projects/{ids['project']}/reviews"

    def request() -> None:
        response = world.api.handle(api_event("POST", path, agent_token, body))
        assert response["statusCode"] == 202, response

    samples = _timed(request, 30)
    # Baseline: the cheapest authenticated round trip through the same guards and resolver.
    trivial = api_event("GET", f"/projects/{ids['project']}/review-missing", agent_token)
    baseline = _timed(lambda: world.api.handle(trivial), 30)
    median, bare = statistics.median(samples), statistics.median(baseline)
    print(
        f"\nPOST /reviews to 202: median {median * 1000:.1f} ms; "
        f"an authenticated 404 {bare * 1000:.1f} ms (ratio {median / bare:.1f}x)"
    )
    assert median < 1.0
