"""The offline migration rules between classic and streams groups, as Kafka 4.4 has them
(`GroupMetadataManager`: `getOrCreateStreamsGroup`, `getStreamsGroupOrThrow`/`castToStreamsGroup`,
`classicGroupJoin`), on the shard with a simulated clock; the Streams rehearsal
(migration/rehearse/streams_*.py) relies on exactly these:

- an empty classic group becomes a streams group on the first StreamsGroupHeartbeat that joins
  (epoch 0), its committed offsets kept;
- a StreamsGroupHeartbeat to a classic group with members, or a non-joining one to an empty
  classic group, is GROUP_ID_NOT_FOUND "Group X is not a streams group.", and writes nothing;
- a JoinGroup to a streams group with members is INCONSISTENT_GROUP_PROTOCOL; to an empty one
  it converts the group to classic, its committed offsets kept;
- the round trip classic -> streams -> classic replays to the same groups and offsets.
"""
from __future__ import annotations

from datetime import timedelta

from kio.schema.errors import ErrorCode

from coordinator.group.classic.group import ClassicGroup, ClassicGroupMember, ClassicGroupState
from coordinator.group.context import RequestContext
from coordinator.group.kio_util import schema
from coordinator.group.streams.model import StreamsGroup
from records import CoordinatorRecord, OffsetCommitKey, OffsetCommitValue

from ...group.streams.driver import beat, join
from ...group.streams.test_heartbeat import ALL, TOP, App, _fast

NOT_STREAMS = "Group app is not a streams group."


def _commit(d, partition: int, offset: int, topic: str = "input") -> None:
    """A committed offset as the log holds it (what a classic or streams member committed)."""
    record = CoordinatorRecord(OffsetCommitKey("app", topic, partition), OffsetCommitValue(offset=offset))
    d.shard.replay(record)
    d.log.append(record)


def _offsets(shard) -> dict[int, int]:
    return {p: o.offset for p, o in shard.offsets.offsets.get("app", {}).get("input", {}).items()}


def _join_group(d, member_id: str = ""):
    """A classic consumer's JoinGroup v9 (Kafka 4.4's newest), protocol type "consumer"."""
    mod = schema("join_group", 9, "request")
    req = mod.JoinGroupRequest(group_id="app", session_timeout=timedelta(seconds=30),
                               rebalance_timeout=timedelta(seconds=60), member_id=member_id,
                               group_instance_id=None, protocol_type="consumer",
                               protocols=(mod.JoinGroupRequestProtocol(name="range", metadata=b""),), reason=None)
    ctx = RequestContext(api_version=9, client_id="client", client_host="/127.0.0.1")
    return d.apply(d.shard.join_group(ctx, req, d.now_ms)).response


def _classic_with_a_member(d) -> ClassicGroup:
    group = ClassicGroup("app", ClassicGroupState.STABLE)
    group.add(ClassicGroupMember("c1", None, "client", "/127.0.0.1", 60_000, 30_000, "consumer",
                                 [("range", b"")]))
    d.shard.groups["app"] = group
    return group


def test_a_streams_join_to_a_classic_group_with_members_is_refused_and_writes_nothing():
    d = _fast()
    _commit(d, 0, 7)
    group = _classic_with_a_member(d)
    before = len(d.log)
    a = d.hb(join("m1", "p1", TOP))
    assert (a.error_code, a.error_message) == (ErrorCode.group_id_not_found, NOT_STREAMS)
    assert d.shard.groups["app"] is group and len(d.log) == before and _offsets(d.shard) == {0: 7}


def test_a_non_joining_streams_heartbeat_to_an_empty_classic_group_is_refused():
    """Only a join converts (Kafka: `getOrCreateStreamsGroup` for epoch 0, else
    `getStreamsGroupOrThrow`, whose cast refuses any other type)."""
    d = _fast()
    _commit(d, 0, 7)
    assert isinstance(d.shard.groups["app"], ClassicGroup) and d.shard.groups["app"].is_empty()
    for epoch in (5, -1):
        a = d.hb(beat("m1", epoch))
        assert (a.error_code, a.error_message) == (ErrorCode.group_id_not_found, NOT_STREAMS), epoch
    assert isinstance(d.shard.groups["app"], ClassicGroup) and _offsets(d.shard) == {0: 7}


def test_classic_to_streams_to_classic_keeps_every_committed_offset():
    d = _fast()
    for p in range(6):
        _commit(d, p, 10 + p)                       # the classic application's commits
    assert isinstance(d.shard.groups["app"], ClassicGroup)
    app = App(d)
    app.join("m1", "p1")                            # first streams join: converted offline
    app.join("m2", "p2")
    app.settle()
    assert isinstance(d.group(), StreamsGroup) and _offsets(d.shard) == {p: 10 + p for p in range(6)}
    assert {t for m in d.group().members.values() for t in m.assigned.active} == ALL

    assert _join_group(d).error_code == ErrorCode.inconsistent_group_protocol   # members still in
    assert isinstance(d.group(), StreamsGroup)
    for p in range(6):
        _commit(d, p, 20 + p)                       # the streams application's commits
    for m in ("m1", "m2"):
        assert d.hb(beat(m, -1)).error_code == ErrorCode.none
    assert d.group().is_empty()

    first = _join_group(d)                          # v9: MEMBER_ID_REQUIRED, but the group is classic now
    assert first.error_code == ErrorCode.member_id_required
    assert isinstance(d.shard.groups["app"], ClassicGroup)
    assert _offsets(d.shard) == {p: 20 + p for p in range(6)}

    reloaded = d.reloaded()                         # the log replays to the same end state
    assert isinstance(reloaded.groups["app"], ClassicGroup)
    assert _offsets(reloaded) == {p: 20 + p for p in range(6)}
