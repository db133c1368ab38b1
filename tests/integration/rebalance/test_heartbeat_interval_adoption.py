"""Real KIP-848 clients heartbeat at the HeartbeatIntervalMs of every response (issue 5 §1).

kcoord's adaptive policy only speeds rebalances up if clients follow the interval each
response carries: the short one while reconciliation work is pending, the stable one
afterwards, and a budget-stretched one when many members share the process. Four
coordinators run side by side, each with one interval policy; two members of one client
(librdkafka or the Java 4.3 client) join a group on each. Once every group is Stable the
heartbeats the server counted (kcoord_group_requests_total{api="ConsumerGroupHeartbeat"})
over a window give each client's real interval.

Each member's first response on an adaptive coordinator carries the pending interval
(100 ms) and later ones the stable interval, so a client that kept its first interval, or
one that ignored the field, heartbeats at the wrong rate and fails here.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from rebalance_helpers import MetricsKcoord, adaptive_policy, fixed_policy
from support.admin import admin_client, create_topic
from support.tansu import TansuBroker
from support.wait import wait_until

MEMBERS = 2
WINDOW_S = 8.0
# name -> (kcoord --config items, the interval every stable member should be told)
POLICIES: dict[str, tuple[tuple[str, ...], int]] = {
    "fixed-2000": (fixed_policy(2000), 2000),
    "adaptive-500": (adaptive_policy(500), 500),
    "adaptive-200": (adaptive_policy(200), 200),
    # Two members against a budget of 5 heartbeats/s: stretched to 2 * 1000 / 5 = 400 ms.
    "adaptive-200-budget-5": (adaptive_policy(200) + ("consumer_heartbeat_budget_per_second=5",), 400),
}
# A member's count over the window is W/I +- 1, so fixed-2000 (4 +- 1 per member) needs the widest band.
TOLERANCE = (0.7, 1.45)


@pytest.fixture(scope="module")
def coordinators(tansu: TansuBroker) -> Iterator[dict[str, MetricsKcoord]]:
    """One kcoord per policy, started in parallel (each takes ~2 s to load its state topic)."""
    procs = {name: MetricsKcoord(upstream=tansu.bootstrap, state_topic=f"__kcoord_hb_{name}_{time.monotonic_ns()}",
                                 state_partitions=1, config=("consumer_session_timeout_ms=45000", *config))
             for name, (config, _) in POLICIES.items()}
    errors: list[BaseException] = []

    def start(p: MetricsKcoord) -> None:
        try:
            p.start(timeout=60)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(p,)) for p in procs.values()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        if errors:
            raise errors[0]
        yield procs
    finally:
        for p in procs.values():
            if p.process is not None and p.process.poll() is None:
                p.stop()


def consumer_factory(client: str, request: pytest.FixtureRequest):
    if client == "java":
        request.getfixturevalue("java_classes")
        from support.java import JavaConsumer
        return JavaConsumer
    from support.rdkafka import RdkafkaConsumer
    return RdkafkaConsumer


def group_stable(admin, group: str) -> bool:
    """ConsumerGroupDescribe says Stable: every member reconciled, so every response from
    now on carries the stable interval. (``admin`` must outlive the call: a collected
    AdminClient never completes its futures.)"""
    described = admin.describe_consumer_groups([group])[group].result(10)
    return described.state.name == "STABLE" and len(described.members) == MEMBERS


@pytest.mark.timeout(120)
@pytest.mark.parametrize("client", ["rdkafka", "java"])
def test_members_heartbeat_at_the_interval_of_every_response(client, coordinators, names, drivers, request):
    Consumer = consumer_factory(client, request)
    groups: dict[str, str] = {}
    members = []
    for name, kc in coordinators.items():
        topic, group = names.topic(), names.group()
        create_topic(kc.bootstrap, topic, MEMBERS)
        groups[name] = group
        for i in range(MEMBERS):
            c = drivers.add(Consumer(kc.bootstrap, topic, group, member=f"{client}-{name}-{i}",
                                     group_protocol="consumer"))
            members.append(c.start(**({"wait_ready": False} if client == "java" else {})))
    for m in members:
        m.wait_for_event("ready", 30)
    for name, kc in coordinators.items():
        admin = admin_client(kc.bootstrap)
        wait_until(lambda: group_stable(admin, groups[name]), 40, 0.1, f"group on {name} Stable")

    before = {name: kc.heartbeat_count() for name, kc in coordinators.items()}
    started = time.monotonic()
    time.sleep(WINDOW_S)  # the measurement itself: heartbeats counted over a fixed window
    elapsed = time.monotonic() - started
    after = {name: kc.heartbeat_count() for name, kc in coordinators.items()}

    measured = {}
    for name, (_, expected_ms) in POLICIES.items():
        count = after[name] - before[name]
        measured[name] = elapsed * 1000 * MEMBERS / count if count else float("inf")
    report = ", ".join(f"{n}: {measured[n]:.0f} ms (told {POLICIES[n][1]})" for n in POLICIES)
    print(f"{client} per-member heartbeat intervals: {report}")
    for name, (_, expected_ms) in POLICIES.items():
        low, high = TOLERANCE
        assert low * expected_ms <= measured[name] <= high * expected_ms, \
            f"{client} does not heartbeat at the interval it is told; per-member intervals: {report}"
    assert not [e for m in members for e in m.errors() if e.get("fatal")]
