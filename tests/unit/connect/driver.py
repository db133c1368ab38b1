"""A deterministic driver for the connect group's handlers (tests/unit/group/context.py's
ShardContext, with the connect APIs and the "connect" timer kind).

Every record goes through bytes and back (records/connect_records.py, or codec.py once
it registers types 1000-1004), so what a test sees is what a reload rebuilds. The shard's
dispatch of the connect APIs is the lead's shared patch; this driver calls the handlers
directly, so it works with and without it. Units are written "A" (the connector) and
"A/0" (its task 0).
"""
from __future__ import annotations

import datetime

from coordinator.group.modern.connect import admin as connect_admin  # noqa: F401 (registers replay)
from coordinator.group.modern.connect import assignment as connect_assignment  # noqa: F401 (registers replay)
from coordinator.group.modern.connect import heartbeat as connect_heartbeat  # noqa: F401 (registers replay)
from coordinator.group.modern.connect import replay as connect_replay  # noqa: F401 (registers replay)
from coordinator.group.modern.connect.timers import KIND
from coordinator.group.result import CancelTimer, Result, ScheduleTimer
from coordinator.protocol import connect_messages as cm
from records import CoordinatorRecord, codec, decode_record, encode_key, encode_value
from records import connect_records as cr
from records._wire import pack_h, string, unpack_h, w_string

from ..group.context import ShardContext

SESSIONED = ("sessioned", 0, 2, 2)


def units(*names: str) -> cm.ConnectorsAndTasks:
    connectors, tasks = [], []
    for n in names:
        if "/" in n:
            c, t = n.split("/")
            tasks.append(cm.ConnectorTaskId(connector=c, task=int(t)))
        else:
            connectors.append(n)
    return cm.ConnectorsAndTasks(connectors=tuple(connectors), tasks=tuple(tasks))


def names(cat) -> set[str]:
    return set(cat.connectors) | {f"{t.connector}/{t.task}" for t in cat.tasks}


def assignor(name="sessioned", lo=0, hi=2, version=2, reason=0, metadata=b"") -> cm.ConnectAssignor:
    return cm.ConnectAssignor(name=name, minimum_version=lo, maximum_version=hi, version=version, reason=reason,
                              metadata=metadata)


def codec_knows_connect() -> bool:
    return 1000 in codec._KEY_LAYOUTS


def encode(record: CoordinatorRecord) -> tuple[bytes, bytes | None]:
    if codec_knows_connect() or record.key.record_type not in cr.CONNECT_RECORD_TYPES:
        return encode_key(record.key), encode_value(record.value, record.value_version)
    cls, _, layout = cr.KEY_LAYOUTS[record.key.record_type]
    out = bytearray(pack_h(record.key.record_type))
    for attr in ("group_id", "member_id")[:len(layout)]:
        w_string(out, getattr(record.key, attr))
    value = None if record.value is None else cr.VALUE_ENCODERS[type(record.value)][0](record.value, 0)
    return bytes(out), value


def decode(key: bytes, value: bytes | None, offset: int):
    rtype = unpack_h(key, 0)[0]
    if codec_knows_connect() or rtype not in cr.CONNECT_RECORD_TYPES:
        return decode_record(key, value, topic="__test", partition=0, offset=offset)
    cls, _, layout = cr.KEY_LAYOUTS[rtype]
    pos, parts = 2, []
    for _ in layout:
        s, pos = string(key, pos)
        parts.append(s)
    v = None if value is None else cr.VALUE_DECODERS[rtype][0](value)
    return CoordinatorRecord(cls(*parts), v, 0)


class ConnectContext(ShardContext):
    def apply(self, result: Result) -> Result:
        for record in result.records:
            key, value = encode(record)
            offset = len(self.log)
            self.log.append((offset, key, value))
            if result.replay:
                self.shard.replay(decode(key, value, offset), offset)
        for t in result.timers:
            if isinstance(t, ScheduleTimer):
                self.timers[t.key] = (t.deadline_ms, t.payload)
            elif isinstance(t, CancelTimer):
                self.timers.pop(t.key, None)
        return result

    def _fire(self, key, payload) -> Result:
        if key[0] == KIND:
            return connect_heartbeat.on_timer(self.shard, key, payload, self.now_ms)
        return self.shard.on_timer(key, payload, self.now_ms)

    def advance(self, ms: int) -> list[Result]:
        end = self.now_ms + ms
        fired = []
        while True:
            due = [(d, k) for k, (d, _) in self.timers.items() if d <= end]
            if not due:
                break
            deadline, key = min(due)
            self.now_ms = max(self.now_ms, deadline)
            _, payload = self.timers.pop(key)
            fired.append(self.apply(self._fire(key, payload)))
        self.now_ms = end
        return fired

    def reload(self, log=None):
        from coordinator.group.shard import GroupCoordinatorShard
        fresh = GroupCoordinatorShard(0, self.config, self.shard.image)
        for offset, key, value in self.log if log is None else log:
            fresh.replay(decode(key, value, offset), offset)
        return fresh

    def loaded(self) -> None:
        self.apply(Result(timers=[*self.shard.on_loaded(self.now_ms),
                                  *connect_heartbeat.on_loaded(self.shard, self.now_ms)]))

    # ------------------------------------------------------------ requests
    def cgh(self, group_id: str, member_id: str, epoch: int, *, assignors=None, owned=None, instance_id=None,
            rebalance_timeout_ms: int | None = None, server_assignor=None, join_defaults=True):
        """A ConnectGroupHeartbeat; on join the fields a worker sends are filled in."""
        if epoch == 0 and join_defaults:
            assignors = (assignor(),) if assignors is None else assignors
            owned = () if owned is None else owned
            rebalance_timeout_ms = 60_000 if rebalance_timeout_ms is None else rebalance_timeout_ms
        req = cm.ConnectGroupHeartbeatRequest(
            group_id=group_id, member_id=member_id, member_epoch=epoch, instance_id=instance_id,
            rebalance_timeout=datetime.timedelta(milliseconds=-1 if rebalance_timeout_ms is None
                                                 else rebalance_timeout_ms),
            server_assignor=server_assignor, client_assignors=None if assignors is None else tuple(assignors),
            connectors_and_tasks=None if owned is None else units(*owned))
        return self.apply(connect_heartbeat.heartbeat(self.shard, self.ctx(0), req, self.now_ms)).response

    def prepare(self, group_id: str, member_id: str, epoch: int):
        req = cm.ConnectPrepareAssignmentRequest(group_id=group_id, member_id=member_id, member_epoch=epoch)
        return self.apply(connect_assignment.prepare(self.shard, self.ctx(0), req, self.now_ms)).response

    def install(self, group_id: str, member_id: str, epoch: int, group_epoch: int, members: dict, error: int = 0):
        """`members`: {worker: [unit names]} or {worker: ([unit names], version, metadata)}."""
        entries = []
        for mid, spec in members.items():
            us, version, metadata = (spec, 2, b"") if isinstance(spec, list) else spec
            entries.append(cm.ConnectInstalledMember(member_id=mid, connectors_and_tasks=units(*us), version=version,
                                                     metadata=metadata))
        req = cm.ConnectInstallAssignmentRequest(group_id=group_id, member_id=member_id, member_epoch=epoch,
                                                 group_epoch=group_epoch, error=error, members=tuple(entries))
        return self.apply(connect_assignment.install(self.shard, self.ctx(0), req, self.now_ms)).response

    def describe(self, *group_ids: str):
        req = cm.ConnectGroupDescribeRequest(group_ids=tuple(group_ids))
        return self.apply(connect_admin.describe(self.shard, self.ctx(0), req, self.now_ms)).response

    def types_written(self, since: int) -> list[tuple[int, bool]]:
        """(record type, is tombstone) of the records written since log offset `since`."""
        return [(unpack_h(k, 0)[0], v is None) for _, k, v in self.log[since:]]

    # raw requests, as a worker (members/connect) builds them
    def send_cgh(self, req):
        return self.apply(connect_heartbeat.heartbeat(self.shard, self.ctx(0), req, self.now_ms)).response

    def send_prepare(self, req):
        return self.apply(connect_assignment.prepare(self.shard, self.ctx(0), req, self.now_ms)).response

    def send_install(self, req):
        return self.apply(connect_assignment.install(self.shard, self.ctx(0), req, self.now_ms)).response
