"""A Kafka-protocol admin client for `kcoord groups`: it speaks only the Kafka protocol, so
the same commands work against kcoord and against Apache Kafka.

What it asks, as Kafka's own Admin client does:
- ListGroups v5 of every broker in Metadata (a Kafka broker lists only the groups it
  coordinates; kcoord lists them all on every listener, and the union removes repeats);
- FindCoordinator(GROUP) for a group, then ConsumerGroupDescribe v0 there, falling back to
  StreamsGroupDescribe (v1, or v0) when that coordinator lists it (Kafka 4.2+ and kcoord), to
  kcoord's ConnectGroupDescribe (32706, docs/design/connect-groups-spec.md) when that coordinator's ApiVersions lists
  it (Kafka closes the connection on an API key it does not know, so it is never sent
  blind), then to DescribeGroups v5 for a classic group;
- OffsetFetch v8 for committed offsets, ListOffsets v1 on each partition's leader for the
  log-end (or earliest, or by-time) offsets that give lag and reset targets;
- OffsetCommit v8 (generation -1, no member: an admin commit, refused by a non-empty group),
  OffsetDelete v0 and DeleteGroups v2; DeleteTopics v4 for a streams group's internal topics.
Security: `--command-config FILE` holds librdkafka/Java client properties (security.protocol,
sasl.mechanism, sasl.username, ...), read by kcoord's own upstream security
(coordinator/security/upstream.py).
"""
from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from kio.schema.consumer_group_describe.v0 import request as cgd_req
from kio.schema.delete_groups.v2 import request as delete_req
from kio.schema.delete_topics.v4 import request as dt_req
from kio.schema.describe_groups.v5 import request as dg_req
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3 import request as fc_req
from kio.schema.list_groups.v5 import request as lg_req
from kio.schema.list_offsets.v1 import request as lo_req
from kio.schema.metadata.v7 import request as md_req
from kio.schema.offset_commit.v8 import request as oc_req
from kio.schema.offset_delete.v0 import request as od_req
from kio.schema.offset_fetch.v8 import request as of_req
from kio.schema.types import BrokerId, GroupId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from coordinator.gateway.listeners import parse_addresses
from coordinator.protocol import connect_messages as cm
from coordinator.protocol.api_keys import STREAMS_GROUP_DESCRIBE
from coordinator.protocol.apis import API_VERSIONS, request_class
from coordinator.protocol.consumer_protocol import MalformedProtocolData, decode_assignment
from coordinator.upstream.client import UpstreamClient
from ops.groups_streams import StreamsMemberInfo, StreamsTopology, member_info, topology_of

LATEST, EARLIEST = -1, -2
_TIMEOUT = 15.0


class GroupsError(Exception):
    """A request answered with an error; the message names the API, the group and the code."""


@dataclass
class Member:
    member_id: str
    client_id: str
    host: str
    instance_id: str | None = None
    member_epoch: int | None = None
    assignment: dict[str, list[int]] = field(default_factory=dict)
    target: dict[str, list[int]] | None = None
    state: str | None = None                  # connect: the worker's reconciliation state
    metadata: bytes = b""                     # connect: what the assigner wrote for the worker
    streams: StreamsMemberInfo | None = None  # streams: process, endpoint, tasks (assignment: what they read)


@dataclass
class GroupDescription:
    group_id: str
    type: str                  # "consumer", "classic", "streams" or "connect" (connectors -> tasks, -1 the connector)
    state: str
    protocol_type: str
    protocol: str = ""         # classic: the assignor in use; consumer: the server assignor
    group_epoch: int | None = None
    assignment_epoch: int | None = None
    members: list[Member] = field(default_factory=list)
    coordinator: tuple[int, str, int] | None = None
    topology: StreamsTopology | None = None   # streams: the topology the coordinator keeps


class GroupAdmin:
    def __init__(self, bootstrap: str, security: Any = None, client_id: str = "kcoord-groups") -> None:
        self.bootstrap = parse_addresses(bootstrap)
        self.security = security
        self.client_id = client_id
        self._links: dict[tuple[str, int], UpstreamClient] = {}
        self._api_versions: dict[tuple[str, int], dict[int, int]] = {}

    async def __aenter__(self) -> GroupAdmin:
        return self

    async def __aexit__(self, *exc) -> None:
        for link in self._links.values():
            link.close()

    async def _link(self, address: tuple[str, int] | None = None) -> UpstreamClient:
        key = address or self.bootstrap[0]
        link = self._links.get(key)
        if link is None or link.closed:
            targets = [address] if address else list(self.bootstrap)
            link = await UpstreamClient.connect(targets, client_id=self.client_id, security=self.security)
            self._links[key] = link
        return link

    async def _ask(self, request: Any, address: tuple[str, int] | None = None) -> Any:
        return await (await self._link(address)).request(request, _TIMEOUT)

    # ------------------------------------------------------------- metadata
    async def metadata(self, topics: list[str] | None = None):
        return await self._ask(md_req.MetadataRequest(
            topics=None if topics is None else tuple(md_req.MetadataRequestTopic(name=TopicName(t)) for t in topics),
            allow_auto_topic_creation=False))

    async def coordinator(self, group: str) -> tuple[int, str, int]:
        resp = await self._ask(fc_req.FindCoordinatorRequest(key=group, key_type=i8(0)))
        if resp.error_code != ErrorCode.none:
            raise GroupsError(f"FindCoordinator({group}): {resp.error_code.name}")
        return int(resp.node_id), resp.host, int(resp.port)

    # ---------------------------------------------------------------- list
    async def list_groups(self, states: tuple[str, ...] = (),
                          types: tuple[str, ...] = ()) -> list[tuple[str, str, str, str]]:
        """(group, type, state, protocol type) of every group of every broker."""
        md = await self.metadata([])
        addresses = [(b.host, int(b.port)) for b in md.brokers] or [self.bootstrap[0]]
        found: dict[str, tuple[str, str, str, str]] = {}
        for address in addresses:
            resp = await self._ask(lg_req.ListGroupsRequest(states_filter=states, types_filter=types), address)
            if resp.error_code != ErrorCode.none:
                raise GroupsError(f"ListGroups at {address[0]}:{address[1]}: {resp.error_code.name}")
            for g in resp.groups:
                found[g.group_id] = (g.group_id, g.group_type or "", g.group_state or "", g.protocol_type or "")
        return sorted(found.values())

    # ------------------------------------------------------------ describe
    async def describe(self, group: str) -> GroupDescription:
        node, host, port = await self.coordinator(group)
        where = (host, port)
        resp = await self._ask(cgd_req.ConsumerGroupDescribeRequest(group_ids=(GroupId(group),),
                                                                    include_authorized_operations=False), where)
        (g,) = resp.groups
        if g.error_code == ErrorCode.none:
            return GroupDescription(
                group, "consumer", g.group_state, "consumer", g.assignor_name, g.group_epoch, g.assignment_epoch,
                [Member(m.member_id, m.client_id, m.client_host, m.instance_id, m.member_epoch,
                        _partitions(m.assignment.topic_partitions), _partitions(m.target_assignment.topic_partitions))
                 for m in g.members], (node, host, port))
        if g.error_code not in (ErrorCode.group_id_not_found, ErrorCode.unsupported_version):
            raise GroupsError(f"ConsumerGroupDescribe({group}): {g.error_code.name}")
        streams_version = (await self.api_versions(where)).get(STREAMS_GROUP_DESCRIBE)
        if streams_version is not None:
            streams = await self._describe_streams(group, where, min(streams_version, 1))
            if streams is not None:
                streams.coordinator = (node, host, port)
                return streams
        if cm.CONNECT_GROUP_DESCRIBE in await self.api_keys(where):
            connect = await self._describe_connect(group, where)
            if connect is not None:
                connect.coordinator = (node, host, port)
                return connect
        resp = await self._ask(dg_req.DescribeGroupsRequest(groups=(GroupId(group),),
                                                            include_authorized_operations=False), where)
        (d,) = resp.groups
        if d.error_code != ErrorCode.none:
            raise GroupsError(f"DescribeGroups({group}): {d.error_code.name}")
        members = []
        for m in d.members:
            assignment: dict[str, list[int]] = {}
            if d.protocol_type == "consumer" and m.member_assignment:
                try:
                    assignment = {t: sorted(p) for t, p in decode_assignment(m.member_assignment).partitions.items()}
                except MalformedProtocolData:
                    pass
            members.append(Member(m.member_id, m.client_id, m.client_host, m.group_instance_id, None, assignment))
        return GroupDescription(group, "classic", d.group_state, d.protocol_type, d.protocol_data, None, None,
                                members, (node, host, port))

    async def api_keys(self, address: tuple[str, int]) -> frozenset[int]:
        """The API keys the broker at `address` lists in ApiVersions (asked once per address)."""
        return frozenset(await self.api_versions(address))

    async def api_versions(self, address: tuple[str, int]) -> dict[int, int]:
        """{API key: highest version} the broker at `address` lists (asked once per address)."""
        versions = self._api_versions.get(address)
        if versions is None:
            resp = await self._ask(request_class(API_VERSIONS, 3)(
                client_software_name="kcoord", client_software_version="0.1.0"), address)
            if int(resp.error_code) != 0:
                raise GroupsError(f"ApiVersions at {address[0]}:{address[1]}: error {int(resp.error_code)}")
            versions = self._api_versions[address] = {int(k.api_key): int(k.max_version) for k in resp.api_keys}
        return versions

    async def _describe_streams(self, group: str, where: tuple[str, int], version: int) -> GroupDescription | None:
        """A streams group through StreamsGroupDescribe; None if it is not one."""
        resp = await self._ask(request_class(STREAMS_GROUP_DESCRIBE, version)(
            group_ids=(group,), include_authorized_operations=False,
            **({"include_topology_description": False} if version >= 1 else {})), where)
        (g,) = resp.groups
        if g.error_code == ErrorCode.group_id_not_found:
            return None
        if g.error_code != ErrorCode.none:
            raise GroupsError(f"StreamsGroupDescribe({group}): {g.error_code.name}"
                              + (f" ({g.error_message})" if g.error_message else ""))
        topology = topology_of(g)
        members = []
        for m in g.members:
            info = member_info(m)
            reads = topology.input_partitions(info.tasks["active"]) if topology else {}
            target = topology.input_partitions(info.target["active"]) if topology else {}
            members.append(Member(m.member_id, m.client_id, m.client_host, m.instance_id, int(m.member_epoch),
                                  reads, target, streams=info))
        return GroupDescription(group, "streams", g.group_state, "streams", getattr(g, "assignor_name", "") or "",
                                int(g.group_epoch), int(g.assignment_epoch), members, topology=topology)

    async def _describe_connect(self, group: str, where: tuple[str, int]) -> GroupDescription | None:
        """A connect group (docs/design/connect-groups-spec.md) through ConnectGroupDescribe; None if it is not one."""
        resp = await self._ask(cm.ConnectGroupDescribeRequest(group_ids=(group,)), where)
        (g,) = resp.groups
        if g.error_code == ErrorCode.group_id_not_found:
            return None
        if g.error_code != 0:
            raise GroupsError(f"ConnectGroupDescribe({group}): error {int(g.error_code)}"
                              + (f" ({g.error_message})" if g.error_message else ""))
        return GroupDescription(
            group, "connect", g.group_state, "connect", g.assignor_name, int(g.group_epoch), int(g.assignment_epoch),
            [Member(m.member_id, m.client_id, m.client_host, m.instance_id, int(m.member_epoch),
                    connect_units(m.assignment), connect_units(m.target_assignment), m.state, m.metadata)
             for m in g.members])

    # ------------------------------------------------------------- offsets
    async def committed(self, group: str) -> dict[tuple[str, int], tuple[int, str]]:
        """(topic, partition) -> (offset, metadata) of every committed offset."""
        _, host, port = await self.coordinator(group)
        resp = await self._ask(of_req.OffsetFetchRequest(
            groups=(of_req.OffsetFetchRequestGroup(group_id=GroupId(group), topics=None),), require_stable=True),
            (host, port))
        (g,) = resp.groups
        if g.error_code != ErrorCode.none:
            raise GroupsError(f"OffsetFetch({group}): {g.error_code.name}")
        out = {}
        for t in g.topics:
            for p in t.partitions:
                if p.error_code != ErrorCode.none:
                    raise GroupsError(f"OffsetFetch({group}) {t.name}-{p.partition_index}: {p.error_code.name}")
                if p.committed_offset >= 0:
                    out[(str(t.name), int(p.partition_index))] = (int(p.committed_offset), p.metadata or "")
        return out

    async def partitions(self, topics: list[str]) -> dict[str, list[int]]:
        md = await self.metadata(topics)
        out = {}
        for t in md.topics:
            if t.error_code != ErrorCode.none:
                raise GroupsError(f"Metadata({t.name}): {t.error_code.name}")
            out[str(t.name)] = sorted(int(p.partition_index) for p in t.partitions)
        return out

    async def list_offsets(self, partitions: list[tuple[str, int]], timestamp: int) -> dict[tuple[str, int], int]:
        """The offset of each partition at `timestamp` (LATEST, EARLIEST or ms), from its leader.
        A time after the last record gives the log-end offset, as kafka-consumer-groups does."""
        if not partitions:
            return {}
        md = await self.metadata(sorted({t for t, _ in partitions}))
        brokers = {int(b.node_id): (b.host, int(b.port)) for b in md.brokers}
        leader = {(str(t.name), int(p.partition_index)): int(p.leader_id) for t in md.topics for p in t.partitions}
        by_leader: dict[int, list[tuple[str, int]]] = defaultdict(list)
        for tp in partitions:
            if tp not in leader:
                raise GroupsError(f"no leader known for {tp[0]}-{tp[1]}")
            by_leader[leader[tp]].append(tp)

        async def ask(node: int, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
            topics: dict[str, list[int]] = defaultdict(list)
            for t, p in tps:
                topics[t].append(p)
            resp = await self._ask(lo_req.ListOffsetsRequest(replica_id=BrokerId(-1), topics=tuple(
                lo_req.ListOffsetsTopic(name=TopicName(t), partitions=tuple(
                    lo_req.ListOffsetsPartition(partition_index=i32(p), timestamp=i64(timestamp)) for p in ps))
                for t, ps in topics.items())), brokers[node])
            out = {}
            for t in resp.topics:
                for p in t.partitions:
                    if p.error_code != ErrorCode.none:
                        raise GroupsError(f"ListOffsets {t.name}-{p.partition_index}: {p.error_code.name}")
                    out[(str(t.name), int(p.partition_index))] = int(p.offset)
            return out

        results = await asyncio.gather(*(ask(n, tps) for n, tps in by_leader.items()))
        merged: dict[tuple[str, int], int] = {}
        for r in results:
            merged.update(r)
        if timestamp >= 0:   # no record at or after that time: the end of the log
            missing = [tp for tp, o in merged.items() if o < 0]
            if missing:
                merged.update(await self.list_offsets(missing, LATEST))
        return merged

    async def commit(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        _, host, port = await self.coordinator(group)
        topics: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for (t, p), o in sorted(offsets.items()):
            topics[t].append((p, o))
        resp = await self._ask(oc_req.OffsetCommitRequest(
            group_id=GroupId(group), generation_id_or_member_epoch=i32(-1), member_id="", group_instance_id=None,
            topics=tuple(oc_req.OffsetCommitRequestTopic(name=TopicName(t), partitions=tuple(
                oc_req.OffsetCommitRequestPartition(partition_index=i32(p), committed_offset=i64(o),
                                                    committed_leader_epoch=i32(-1), committed_metadata="")
                for p, o in ps)) for t, ps in topics.items())), (host, port))
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code != ErrorCode.none:
                    raise GroupsError(f"OffsetCommit({group}) {t.name}-{p.partition_index}: {p.error_code.name}")

    async def delete_offsets(self, group: str, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], str]:
        _, host, port = await self.coordinator(group)
        topics: dict[str, list[int]] = defaultdict(list)
        for t, p in partitions:
            topics[t].append(p)
        resp = await self._ask(od_req.OffsetDeleteRequest(group_id=GroupId(group), topics=tuple(
            od_req.OffsetDeleteRequestTopic(name=TopicName(t), partitions=tuple(
                od_req.OffsetDeleteRequestPartition(partition_index=i32(p)) for p in ps))
            for t, ps in topics.items())), (host, port))
        if resp.error_code != ErrorCode.none:
            raise GroupsError(f"OffsetDelete({group}): {resp.error_code.name}")
        return {(str(t.name), int(p.partition_index)): p.error_code.name for t in resp.topics for p in t.partitions}

    async def delete_topics(self, topics: list[str]) -> dict[str, str]:
        """DeleteTopics (forwarded by kcoord to its cluster): {topic: error name}."""
        resp = await self._ask(dt_req.DeleteTopicsRequest(topic_names=tuple(TopicName(t) for t in topics),
                                                          timeout=i32Timedelta.parse(timedelta(seconds=_TIMEOUT))))
        return {str(r.name): r.error_code.name for r in resp.responses}

    async def delete_groups(self, groups: list[str]) -> dict[str, str]:
        out = {}
        for group in groups:
            _, host, port = await self.coordinator(group)
            resp = await self._ask(delete_req.DeleteGroupsRequest(groups_names=(GroupId(group),)), (host, port))
            for r in resp.results:
                out[str(r.group_id)] = r.error_code.name
        return out


def connect_units(cat: cm.ConnectorsAndTasks) -> dict[str, list[int]]:
    """Connector -> its units, -1 standing for the connector itself (Connect's CONNECTOR_TASK)."""
    out: dict[str, list[int]] = {c: [-1] for c in cat.connectors}
    for t in cat.tasks:
        out.setdefault(t.connector, []).append(int(t.task))
    return {c: sorted(ts) for c, ts in out.items()}


def _partitions(topic_partitions) -> dict[str, list[int]]:
    return {tp.topic_name: sorted(tp.partitions) for tp in topic_partitions}
