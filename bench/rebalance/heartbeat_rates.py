"""The heartbeat interval each client really keeps, as the server counts it.

Per policy, one `kcoord serve` with a Prometheus endpoint; two KIP-848 members of one
client join a group on each; once every group is Stable (ConsumerGroupDescribe), the
ConsumerGroupHeartbeat requests counted over a window give the per-member interval.
Clients are measured one after the other, so a coordinator's count is one client's.
"""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from rebalance_helpers import MetricsKcoord
from support.admin import admin_client, create_topic
from support.wait import wait_until

MEMBERS = 2


@dataclass
class IntervalFigure:
    policy: str
    client: str
    told_ms: int
    measured_ms: float
    heartbeats: int
    window_s: float


def _consumer(client: str, bootstrap: str, topic: str, group: str, name: str):
    if client == "java":
        from support.java import JavaConsumer
        return JavaConsumer(bootstrap, topic, group, member=name, group_protocol="consumer")
    from support.rdkafka import RdkafkaConsumer
    return RdkafkaConsumer(bootstrap, topic, group, member=name, group_protocol="consumer")


def measure(coordinators: dict[str, tuple[MetricsKcoord, int]], client: str, window_s: float) -> list[IntervalFigure]:
    """``coordinators``: policy name -> (running kcoord, the stable interval it should hand out)."""
    members = []
    groups = {}
    try:
        for name, (kc, _) in coordinators.items():
            tag = uuid.uuid4().hex[:8]
            topic, group = f"rb-hb-{tag}", f"rbg-hb-{tag}"
            create_topic(kc.bootstrap, topic, MEMBERS)
            groups[name] = group
            for i in range(MEMBERS):
                c = _consumer(client, kc.bootstrap, topic, group, f"{client}-{name}-{i}")
                members.append(c)
                c.start(**({"wait_ready": False} if client == "java" else {}))
        for m in members:
            m.wait_for_event("ready", 30)
        for name, (kc, _) in coordinators.items():
            admin = admin_client(kc.bootstrap)  # kept referenced: a collected AdminClient drops its futures

            def stable() -> bool:
                d = admin.describe_consumer_groups([groups[name]])[groups[name]].result(10)
                return d.state.name == "STABLE" and len(d.members) == MEMBERS

            wait_until(stable, 60, 0.1, f"group on {name} Stable")
        before = {name: kc.heartbeat_count() for name, (kc, _) in coordinators.items()}
        started = time.monotonic()
        time.sleep(window_s)  # the measurement window
        elapsed = time.monotonic() - started
        out = []
        for name, (kc, told) in coordinators.items():
            count = int(kc.heartbeat_count() - before[name])
            measured = elapsed * 1000 * MEMBERS / count if count else float("inf")
            out.append(IntervalFigure(name, client, told, measured, count, elapsed))
        return out
    finally:
        for m in members:
            m.shutdown()
