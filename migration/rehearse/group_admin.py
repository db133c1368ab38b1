"""Read a group's shape through the cluster's own APIs: FindCoordinator, ListGroups,
ConsumerGroupDescribe, StreamsGroupDescribe and DescribeGroups, over one plain socket per broker.

confluent-kafka's AdminClient describes groups too, but drops what a rehearsal is about:
the group epoch and assignment epoch, member epochs, and each member's protocol
(ConsumerGroupDescribe v1 `MemberType`, KIP-1099). So these calls are made directly,
with kcoord's protocol layer (kio messages) and versions negotiated via ApiVersions.
"""
from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.protocol.apis import request_class, request_header_version, response_class, response_header_version
from coordinator.protocol.codec import decode_body, encode_body
from coordinator.protocol.consumer_protocol import MalformedProtocolData, decode_assignment
from coordinator.protocol.framing import RequestHeader, decode_response_header

API_VERSIONS, FIND_COORDINATOR, DESCRIBE_GROUPS, LIST_GROUPS, CONSUMER_GROUP_DESCRIBE = 18, 10, 15, 16, 69
STREAMS_GROUP_DESCRIBE = 89
# (lowest acceptable, highest wanted) per API.
WANTED = {API_VERSIONS: (3, 3), FIND_COORDINATOR: (4, 4), LIST_GROUPS: (5, 5),
          CONSUMER_GROUP_DESCRIBE: (0, 1), DESCRIBE_GROUPS: (0, 5), STREAMS_GROUP_DESCRIBE: (0, 1)}
CLIENT_ID = "kcoord-rehearse"
GROUP_ID_NOT_FOUND = int(ErrorCode.group_id_not_found)
# Attempts at one sample (ListGroups, then the listed type's describe) before it is given up
# as torn. A conversion is one coordinator write, so the next ListGroups already lists the new
# type; only a group whose listing moves again within each of the retries stays torn.
DESCRIBE_ATTEMPTS = 3


class AdminError(RuntimeError):
    pass


class BrokerConnection:
    """One connection; requests go one at a time (a probe needs no pipelining)."""

    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        self.address = (host, port)
        self.sock = socket.create_connection(self.address, timeout=timeout)
        self._correlation = 0
        self.versions: dict[int, int] = {}
        response = self._call(API_VERSIONS, WANTED[API_VERSIONS][1], client_software_name=CLIENT_ID,
                              client_software_version="1")
        if response.error_code != 0:
            raise AdminError(f"ApiVersions to {host}:{port} failed with error {response.error_code}")
        offered = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}
        for key, (low, high) in WANTED.items():
            have = offered.get(key)
            if have is not None and have[0] <= high and have[1] >= low:
                self.versions[key] = min(high, have[1])

    def call(self, api_key: int, **fields: Any) -> Any:
        version = self.versions.get(api_key)
        if version is None:
            raise AdminError(f"broker {self.address[0]}:{self.address[1]} offers no usable version of API {api_key} "
                             f"(need {WANTED[api_key][0]}..{WANTED[api_key][1]})")
        return self._call(api_key, version, **fields)

    def _call(self, api_key: int, version: int, **fields: Any) -> Any:
        self._correlation += 1
        body = request_class(api_key, version)(**fields)
        payload = RequestHeader(api_key, version, self._correlation, CLIENT_ID).encode(
            request_header_version(api_key, version)) + encode_body(body)
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", self._read(4))[0]
        frame = b"\0\0\0\0" + self._read(size)
        header, offset = decode_response_header(frame, response_header_version(api_key, version))
        if header.correlation_id != self._correlation:
            raise AdminError(f"correlation id {header.correlation_id}, expected {self._correlation}")
        return decode_body(response_class(api_key, version), frame, offset)

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise AdminError(f"{self.address[0]}:{self.address[1]} closed the connection mid-response")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


@dataclass(frozen=True, slots=True)
class MemberView:
    member_id: str
    client_id: str
    protocol: str          # "classic" | "consumer" | "streams" ("classic" for every member of a classic group)
    member_epoch: int | None  # None in a classic group (DescribeGroups has no generation)
    partitions: tuple[int, ...]  # of the rehearsal topic; current assignment
    tasks: tuple[str, ...] = ()  # a streams member's current active tasks, "<subtopology>_<partition>"


@dataclass(frozen=True, slots=True)
class GroupView:
    """What the coordinator says about the group at one moment."""

    group_type: str        # "classic" | "consumer" | "streams" | "" (not listed, or torn)
    state: str             # Kafka's state name, "" when not listed or torn
    group_epoch: int | None = None
    assignment_epoch: int | None = None
    members: tuple[MemberView, ...] = field(default=())
    error: str | None = None
    # The group's type changed between ListGroups and the describe on every attempt
    # (GroupAdmin._describe): type and state unknown, ``error`` says what was answered.
    torn: bool = False


@dataclass(frozen=True, slots=True)
class _Disagreement:
    """A describe's answer that the group is not of the type ListGroups listed just before."""

    answer: str      # what the broker answered
    view: GroupView  # the sample as that answer has it, kept when the listing did not move


def _consumer_protocol_partitions(assignment: bytes, topic: str) -> tuple[int, ...]:
    """Partitions of ``topic`` in a classic ConsumerProtocolAssignment (any version)."""
    try:
        parsed = decode_assignment(assignment)
    except MalformedProtocolData:  # not a consumer-protocol assignment: nothing to show
        return ()
    return tuple(sorted(p for t, parts in parsed.partitions.items() if t == topic for p in parts))


class GroupAdmin:
    """Describes one group through its coordinator, reconnecting after failures."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        host, _, port = bootstrap.split(",")[0].rpartition(":")
        self.bootstrap = (host, int(port))
        self.group = group
        self.topic = topic
        self._coordinator: BrokerConnection | None = None

    def close(self) -> None:
        if self._coordinator is not None:
            self._coordinator.close()
            self._coordinator = None

    def describe(self) -> GroupView:
        try:
            return self._describe(self._connection())
        except (OSError, AdminError, ValueError) as exc:  # the next sample reconnects
            self.close()
            return GroupView("", "", error=f"{type(exc).__name__}: {exc}")

    def _connection(self) -> BrokerConnection:
        if self._coordinator is None:
            boot = BrokerConnection(*self.bootstrap)
            try:
                resp = boot.call(FIND_COORDINATOR, key_type=0, coordinator_keys=(self.group,))
            finally:
                boot.close()
            c = resp.coordinators[0]
            if c.error_code != 0:
                raise AdminError(f"FindCoordinator({self.group}) failed with error {c.error_code}: {c.error_message}")
            self._coordinator = BrokerConnection(str(c.host), int(c.port))
        return self._coordinator

    def _describe(self, conn: BrokerConnection) -> GroupView:
        """ListGroups, then the listed type's describe; again, up to DESCRIBE_ATTEMPTS times in
        all, while the describe says the group is not of the listed type and the listing moved.

        A conversion (or a deletion) can land between the two requests. ConsumerGroupDescribe
        and StreamsGroupDescribe then answer GROUP_ID_NOT_FOUND ("not a consumer/streams
        group"), and DescribeGroups below v6 answers "Dead" with no error (Kafka's
        GroupMetadataManager.describeGroups; KIP-1043 added GROUP_ID_NOT_FOUND in v6;
        coordinator/group/group_admin.py describe_group). Taken as is, such a sample reads
        "classic Dead" although the group is alive and of another type. The next ListGroups
        lists the group's new type (or no longer lists a deleted group).

        A retake that lists the same type and state as the attempt before and gets the same
        disagreement is no race: nothing was written between the two listings, so the describe
        disagrees with the listing itself (a coordinator bug the checks must see). The sample
        is then what the describe says (_Disagreement.view), not a torn one."""
        answers: list[str] = []
        previous: tuple[str, str] | None = None
        for _ in range(DESCRIBE_ATTEMPTS):
            listed = conn.call(LIST_GROUPS, states_filter=(), types_filter=())
            if listed.error_code != 0:
                raise AdminError(f"ListGroups failed with error {listed.error_code}")
            mine = [g for g in listed.groups if g.group_id == self.group]
            if not mine:
                return GroupView("", "")
            group_type, state = str(mine[0].group_type).lower(), str(mine[0].group_state)
            describe = {"consumer": self._describe_consumer, "streams": self._describe_streams}.get(
                group_type, self._describe_classic)
            answer = describe(conn, group_type, state)
            if isinstance(answer, GroupView):
                return answer
            if state.lower() == "dead":  # listed Dead, and the describe agrees: the group's state
                return GroupView(group_type, state)
            if (group_type, state) == previous:  # the listing did not move: no race
                return answer.view
            previous = (group_type, state)
            answers.append(f"listed {group_type} {state}, {answer.answer}")
        return GroupView("", "", error=f"the group's type changed between ListGroups and the describe "
                                       f"{len(answers)} times: {'; '.join(answers)}", torn=True)

    # Each describe returns the view, or a _Disagreement when the answer says the group is no
    # longer a group of the listed type.

    def _describe_consumer(self, conn: BrokerConnection, group_type: str,
                           state: str) -> GroupView | _Disagreement:
        resp = conn.call(CONSUMER_GROUP_DESCRIBE, group_ids=(self.group,), include_authorized_operations=False)
        g = resp.groups[0]
        if g.error_code != 0:
            error = f"ConsumerGroupDescribe error {g.error_code}: {g.error_message}"
            if g.error_code == GROUP_ID_NOT_FOUND:  # converted to classic (or deleted) since ListGroups
                return _Disagreement(error, GroupView(group_type, state, error=error))
            return GroupView(group_type, state, error=error)
        members = []
        for m in g.members:
            parts = tuple(sorted(p for tp in m.assignment.topic_partitions if tp.topic_name == self.topic
                                 for p in tp.partitions))
            member_type = getattr(m, "member_type", -1)  # v0 has no MemberType
            protocol = {0: "classic", 1: "consumer"}.get(int(member_type), "unknown")
            members.append(MemberView(str(m.member_id), str(m.client_id), protocol, int(m.member_epoch), parts))
        return GroupView(group_type, str(g.group_state), int(g.group_epoch), int(g.assignment_epoch),
                         tuple(sorted(members, key=lambda v: v.client_id)))

    def _describe_streams(self, conn: BrokerConnection, group_type: str,
                          state: str) -> GroupView | _Disagreement:
        resp = conn.call(STREAMS_GROUP_DESCRIBE, group_ids=(self.group,), include_authorized_operations=False)
        g = resp.groups[0]
        if g.error_code != 0:
            error = f"StreamsGroupDescribe error {g.error_code}: {g.error_message}"
            if g.error_code == GROUP_ID_NOT_FOUND:  # converted to classic (or deleted) since ListGroups
                return _Disagreement(error, GroupView(group_type, state, error=error))
            return GroupView(group_type, state, error=error)
        members = []
        for m in g.members:
            tasks = tuple(sorted(f"{t.subtopology_id}_{p}" for t in m.assignment.active_tasks for p in t.partitions))
            source = tuple(sorted(int(t.split("_")[1]) for t in tasks if t.startswith("0_")))
            members.append(MemberView(str(m.member_id), str(m.client_id), "streams", int(m.member_epoch),
                                      source, tasks))
        return GroupView(group_type, str(g.group_state), int(g.group_epoch), int(g.assignment_epoch),
                         tuple(sorted(members, key=lambda v: v.client_id)))

    def _describe_classic(self, conn: BrokerConnection, group_type: str,
                          state: str) -> GroupView | _Disagreement:
        resp = conn.call(DESCRIBE_GROUPS, groups=(self.group,), include_authorized_operations=False)
        g = resp.groups[0]
        if g.error_code != 0:
            error = f"DescribeGroups error {g.error_code}"
            if g.error_code == GROUP_ID_NOT_FOUND:  # v6+: converted or deleted since ListGroups
                return _Disagreement(error, GroupView(group_type, state, error=error))
            return GroupView(group_type, state, error=error)
        if str(g.group_state).lower() == "dead" and group_type == "classic":
            # Below v6, a group that is not classic, like a missing one, is "Dead" with no error.
            return _Disagreement("DescribeGroups Dead", GroupView(group_type, "Dead"))
        members = tuple(sorted((MemberView(str(m.member_id), str(m.client_id), "classic", None,
                                           _consumer_protocol_partitions(bytes(m.member_assignment), self.topic))
                                for m in g.members), key=lambda v: v.client_id))
        return GroupView(group_type, str(g.group_state), members=members)
