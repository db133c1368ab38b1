"""A shard with the streams group type, a simulated clock, its timers, and its log of written
records kept as Kafka's bytes (record_types.encode), so a reload decodes them as a load would."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta

from coordinator.config import CoordinatorConfig
from coordinator.group.builtin import builtin_registry
from coordinator.group.context import RequestContext
from coordinator.group.image import MetadataImage, TopicImage
from coordinator.group.kio_util import schema
from coordinator.group.result import ScheduleTimer
from coordinator.group.shard import GroupCoordinatorShard
from coordinator.group.streams import contribution
from coordinator.group.streams import record_types as rt

NOW = 1_000_000
REQ = schema("streams_group_heartbeat", 1, "request")


def image(**topics: int) -> MetadataImage:
    return MetadataImage.of([TopicImage(uuid.uuid5(uuid.NAMESPACE_DNS, name), name, n) for name, n in topics.items()])


def topic_info(name: str, partitions: int = 0):
    return REQ.TopicInfo(name=name, partitions=partitions, replication_factor=0, topic_configs=())


def subtopology(sid: str, sources=(), changelogs=(), sinks=(), repartition=(), copartition=()):
    return REQ.Subtopology(subtopology_id=sid, source_topics=tuple(sources), source_topic_regex=(),
                           state_changelog_topics=tuple(topic_info(c) if isinstance(c, str) else c for c in changelogs),
                           repartition_sink_topics=tuple(sinks),
                           repartition_source_topics=tuple(r if not isinstance(r, str) else topic_info(r)
                                                           for r in repartition),
                           copartition_groups=tuple(_copartition(c) for c in copartition))


def _copartition(c):
    """(source indexes) or ((source indexes), (repartition source indexes))."""
    if c and isinstance(c[0], tuple):
        return REQ.CopartitionGroup(source_topics=c[0], repartition_source_topics=c[1])
    return REQ.CopartitionGroup(source_topics=tuple(c))


def topology(*subs, epoch: int = 1):
    return REQ.Topology(epoch=epoch, subtopologies=tuple(subs))


def ids(tasks):
    return tuple(REQ.TaskIds(subtopology_id=s, partitions=tuple(sorted(p for ss, p in tasks if ss == s)))
                 for s in sorted({s for s, _ in tasks}))


def join(member: str, process: str, top, group: str = "app", **kw):
    return REQ.StreamsGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=0, endpoint_information_epoch=0,
        rebalance_timeout=timedelta(seconds=30), topology=top, active_tasks=(), standby_tasks=(),
        warmup_tasks=(), process_id=process, client_tags=(), task_offsets=None, task_end_offsets=None, **kw)


def beat(member: str, epoch: int, owned=None, group: str = "app", endpoint_epoch: int = 0, **kw):
    """A heartbeat; `owned` is (active, standby, warmup) sets of tasks, or None."""
    a, s, w = owned if owned is not None else (None, None, None)
    return REQ.StreamsGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=epoch, endpoint_information_epoch=endpoint_epoch,
        active_tasks=None if a is None else ids(a), standby_tasks=None if s is None else ids(s),
        warmup_tasks=None if w is None else ids(w), client_tags=None, task_offsets=None, task_end_offsets=None,
        **kw)


@dataclass
class Answer:
    """The parts of a response the tests read, tasks as sets."""
    raw: object

    def __getattr__(self, name):
        return getattr(self.raw, name)

    def tasks(self, kind: str = "active"):
        got = getattr(self.raw, f"{kind}_tasks")
        return None if got is None else {(t.subtopology_id, p) for t in got for p in t.partitions}

    def statuses(self) -> dict[int, str]:
        return {s.status_code: s.status_detail for s in self.raw.status or ()}


class StreamsConfig(CoordinatorConfig):
    """CoordinatorConfig has no streams_* fields yet; settings_of reads them where present."""


class Driver:
    def __init__(self, img: MetadataImage, **config) -> None:
        self.registry = builtin_registry()
        self.config = StreamsConfig()
        for k, v in config.items():
            setattr(self.config, k, v)
        self.shard = GroupCoordinatorShard(0, config=self.config, image=img, registry=self.registry)
        self.log: list = []
        self.timers: dict[tuple, tuple[int, object]] = {}
        self.now_ms = NOW

    def apply(self, result):
        self.shard.apply(result)
        # streams records as Kafka's bytes; the others (a converted classic group's tombstones)
        # as written, records/ has their codec and its own tests
        self.log.extend(rt.encode(r) if isinstance(r.key, rt.KEY_CLASSES) else r for r in result.records)
        for t in result.timers:
            if isinstance(t, ScheduleTimer):
                self.timers[t.key] = (t.deadline_ms, t.payload)
            else:
                self.timers.pop(t.key, None)
        return result

    def hb(self, req, version: int = 1) -> Answer:
        ctx = RequestContext(api_version=version, client_id="client", client_host="/127.0.0.1")
        return Answer(self.apply(self.shard.handle(contribution.OPERATION, ctx, req, self.now_ms)).response)

    def advance(self, ms: int) -> None:
        end = self.now_ms + ms
        while True:
            due = sorted((d, k) for k, (d, _) in self.timers.items() if d <= end)
            if not due:
                break
            deadline, key = due[0]
            self.now_ms = max(self.now_ms, deadline)
            _, payload = self.timers.pop(key)
            self.apply(self.shard.on_timer(key, payload, self.now_ms))
        self.now_ms = end

    def group(self, group_id: str = "app"):
        return self.shard.groups[group_id]

    def reloaded(self) -> GroupCoordinatorShard:
        fresh = GroupCoordinatorShard(0, config=self.config, image=self.shard.image, registry=self.registry)
        for offset, entry in enumerate(self.log):
            fresh.replay(rt.decode(*entry) if isinstance(entry, tuple) else entry, offset)
        return fresh
