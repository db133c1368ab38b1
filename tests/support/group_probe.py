"""Raw group-API probes of one kcoord (or Kafka) address, for checks and benchmarks that
need an exact answer rather than a client's retries: who coordinates a group
(FindCoordinator v3), a standalone commit of partition 0 (OffsetCommit v8, generation -1,
an empty group) and its committed offset (OffsetFetch v8)."""
from __future__ import annotations

from typing import Any

from . import raw_client

FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH = 10, 8, 9


def find(address: str, group: str) -> tuple[int, int, str, int]:
    """(error code, node id, host, port) of FindCoordinator v3 asked of ``address``."""
    r = raw_client.call_with(address, FIND_COORDINATOR, 3, key=group, key_type=0)
    return int(r.error_code), int(r.node_id), r.host, int(r.port)


def commit_request(group: str, topic: str, offset: int) -> Any:
    t = raw_client.request_types(OFFSET_COMMIT, 8)
    return t.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=(t.OffsetCommitRequestTopic(name=topic, partitions=(t.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata=""),)),))


def commit(address: Any, group: str, topic: str, offset: int) -> int:
    """A standalone commit of partition 0; its error code. ``address`` is "host:port" or an
    open socket."""
    r = raw_client.call(address, OFFSET_COMMIT, 8, commit_request(group, topic, offset))
    return int(r.topics[0].partitions[0].error_code)


def fetch(address: Any, group: str, topic: str) -> tuple[int, int]:
    """(error code, committed offset of partition 0) by OffsetFetch v8."""
    t = raw_client.request_types(OFFSET_FETCH, 8)
    r = raw_client.call(address, OFFSET_FETCH, 8, t.OffsetFetchRequest(groups=(t.OffsetFetchRequestGroup(
        group_id=group, topics=(t.OffsetFetchRequestTopics(name=topic, partition_indexes=(0,)),)),),
        require_stable=False))
    g = r.groups[0]
    if g.error_code:
        return int(g.error_code), -1
    p = g.topics[0].partitions[0]
    return int(p.error_code), int(p.committed_offset)
