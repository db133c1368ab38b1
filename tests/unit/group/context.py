"""A deterministic driver for the sans-IO shard (like Kafka's GroupMetadataManagerTestContext).

Every result's records are encoded with the real `records` codec, decoded again and
replayed, so tests exercise exactly what a reload from the state topic rebuilds.
Time is simulated; `advance()` fires timers in deadline order.
"""
from __future__ import annotations

import uuid
from datetime import timedelta

from kio.schema.consumer_group_heartbeat.v0 import request as heartbeat_v0
from kio.schema.consumer_group_heartbeat.v1.request import TopicPartitions
from kio.schema.consumer_group_heartbeat.v1 import request as heartbeat_v1
from kio.schema.errors import ErrorCode

from coordinator.config import CoordinatorConfig
from coordinator.group.image import MetadataImage, TopicImage
from coordinator.group.result import CancelTimer, Result, ScheduleTimer
from coordinator.group.shard import GroupCoordinatorShard, RequestContext
from records import decode_record, encode_key, encode_value

UNCHANGED = object()


def topic(name: str, partitions: int, topic_id: uuid.UUID | None = None) -> TopicImage:
    return TopicImage(topic_id=topic_id or uuid.uuid5(uuid.NAMESPACE_DNS, name), name=name,
                      num_partitions=partitions)


class ShardContext:
    def __init__(self, *topics: TopicImage, config: CoordinatorConfig | None = None, now_ms: int = 1_000_000,
                 registry=None):
        self.config = config or CoordinatorConfig()
        self.registry = registry     # None: the built-in group types (coordinator/group/builtin.py)
        self.shard = GroupCoordinatorShard(0, self.config, MetadataImage.of(topics), registry=registry)
        self.now_ms = now_ms
        self.timers: dict[tuple, tuple[int, object]] = {}
        self.log: list[tuple[int, bytes, bytes | None]] = []  # the state topic: (offset, key, value)
        self.completed: dict[int, object] = {}  # responses of parked requests, by token

    # ------------------------------------------------------------ plumbing
    def apply(self, result: Result) -> Result:
        for record in result.records:
            key, value = encode_key(record.key), encode_value(record.value, record.value_version)
            offset = len(self.log)
            self.log.append((offset, key, value))
            if result.replay:
                self.shard.replay(decode_record(key, value, topic="__test", partition=0, offset=offset), offset)
        for token, response in result.completions:
            self.completed[token] = response
        for t in result.timers:
            if isinstance(t, ScheduleTimer):
                self.timers[t.key] = (t.deadline_ms, t.payload)
            elif isinstance(t, CancelTimer):
                self.timers.pop(t.key, None)
        return result

    def advance(self, ms: int) -> list[Result]:
        """Move the clock forward, firing due timers (and timers they schedule) in order."""
        end = self.now_ms + ms
        fired = []
        while True:
            due = [(d, k) for k, (d, _) in self.timers.items() if d <= end]
            if not due:
                break
            deadline, key = min(due)
            self.now_ms = max(self.now_ms, deadline)
            _, payload = self.timers.pop(key)
            fired.append(self.apply(self.shard.on_timer(key, payload, self.now_ms)))
        self.now_ms = end
        return fired

    def loaded(self) -> None:
        """Arm what the runtime arms once a shard is loaded (session and expiry timers)."""
        self.apply(Result(timers=self.shard.on_loaded(self.now_ms)))

    def update_image(self, *topics: TopicImage) -> None:
        image = MetadataImage.of(topics, version=self.shard.image.version + 1)
        for t in self.shard.on_metadata_update(image, self.now_ms):
            self.apply(Result(timers=[t]))

    def reload(self, log=None) -> GroupCoordinatorShard:
        """A fresh shard rebuilt from the log (or from `log`, e.g. a prefix), as a restart would."""
        fresh = GroupCoordinatorShard(0, self.config, self.shard.image, registry=self.registry)
        for offset, key, value in self.log if log is None else log:
            fresh.replay(decode_record(key, value, topic="__test", partition=0, offset=offset), offset)
        return fresh

    def ctx(self, version: int = 1) -> RequestContext:
        return RequestContext(api_version=version, client_id="client", client_host="/127.0.0.1")

    # ------------------------------------------------------------ requests
    def heartbeat(self, group_id: str, member_id: str, epoch: int, *, topics=UNCHANGED, regex=None,
                  owned=UNCHANGED, rebalance_timeout_ms: int | None = None, instance_id=None,
                  rack_id=None, assignor=None, version: int = 1):
        """Send a ConsumerGroupHeartbeat. On join (epoch 0) the fields a real client sends
        on join are filled in unless given."""
        if epoch == 0:
            topics = None if topics is UNCHANGED and regex is not None else topics
            topics = () if topics is UNCHANGED else topics
            owned = () if owned is UNCHANGED else owned
            rebalance_timeout_ms = 300_000 if rebalance_timeout_ms is None else rebalance_timeout_ms
        # the request's class is its version (the shard reads the version from it)
        req = (heartbeat_v0 if version == 0 else heartbeat_v1).ConsumerGroupHeartbeatRequest(
            group_id=group_id, member_id=member_id, member_epoch=epoch, instance_id=instance_id,
            rack_id=rack_id,
            rebalance_timeout=timedelta(milliseconds=-1 if rebalance_timeout_ms is None else rebalance_timeout_ms),
            subscribed_topic_names=None if topics is UNCHANGED else (tuple(topics) if topics is not None else None),
            server_assignor=assignor, topic_partitions=None if owned is UNCHANGED else self._owned(owned),
            **({} if version == 0 else {"subscribed_topic_regex": regex}))
        result = self.apply(self.shard.consumer_group_heartbeat(self.ctx(version), req, self.now_ms))
        return result.response

    def _owned(self, owned) -> tuple:
        if isinstance(owned, dict):
            owned = owned.items()
        return tuple(TopicPartitions(topic_id=self.id_of(t) if isinstance(t, str) else t,
                                     partitions=tuple(sorted(ps))) for t, ps in owned)

    def id_of(self, name: str) -> uuid.UUID:
        return self.shard.image.topics_by_name[name].topic_id

    def call(self, method: str, request, version: int, client_id: str = "client"):
        """The response, or a `Pending` when the request is parked (see `completed`)."""
        ctx = RequestContext(api_version=version, client_id=client_id, client_host="/127.0.0.1")
        result = self.apply(getattr(self.shard, method)(ctx, request, self.now_ms))
        return Pending(result.parked, self) if result.parked is not None else result.response

    # ------------------------------------------------------------ helpers
    def group(self, group_id: str):
        return self.shard.groups[group_id]

    def member(self, group_id: str, member_id: str):
        return self.shard.groups[group_id].members[member_id]

    def assigned(self, response) -> dict[str, set[int]]:
        """{topic name: partitions} of a heartbeat response's assignment."""
        names = {t.topic_id: t.name for t in self.shard.image.topics_by_name.values()}
        return {names[tp.topic_id]: set(tp.partitions) for tp in response.assignment.topic_partitions}


class Pending:
    """A parked JoinGroup/SyncGroup: `.response` once a later operation answered it."""

    def __init__(self, token: int, ctx: ShardContext) -> None:
        self.token, self._ctx = token, ctx

    @property
    def done(self) -> bool:
        return self.token in self._ctx.completed

    @property
    def response(self):
        assert self.done, "the request is still parked"
        return self._ctx.completed[self.token]


def ok(response) -> None:
    assert response.error_code == ErrorCode.none, (response.error_code, response.error_message)
