"""The membership shell: one kcoord instance in its upstream group (asyncio; it owns the
links to the upstream and reads the monotonic clock, the rest of this package is pure).

The group is a classic group with protocol type `kcoord` (works on Tansu and on every
Kafka, like Connect's `connect` and Schema Registry's `sr` groups):
- FindCoordinator(GROUP) on the bootstrap link, then JoinGroup v5 / SyncGroup v3 /
  Heartbeat v3 / LeaveGroup v3 on a link to the group's coordinator;
- the leader decodes every member's metadata (protocol.py) and balances the shards
  (balancer.py); a member whose metadata cannot be read is left without shards and
  logged, it cannot stop the others' rebalance;
- cooperative: a member keeps serving its shards through a rebalance; one that lost
  shards in an assignment rejoins at once, so the leader places them in the follow-up
  generation (balancer.py);
- static membership (`static=True`, KIP-345): the instance id is the group instance id, so
  a restart within the session timeout gets its shards back without a rebalance;
  `leave()` removes it at once (LeaveGroup v3 by instance id), so a scale-down moves its
  shards without waiting for the session timeout;
- `static=None` (auto) asks the upstream's ApiVersions first and joins as a dynamic member
  on Tansu, whose group coordinator cannot carry a static member (the reasons are in
  upstream.static_membership_works); the balancer still refuses a second member with the
  same instance id. A dynamic member heartbeats at least six times a session, and on a
  second link while its JoinGroup/SyncGroup are held, so its lease holds through Tansu's
  session/2 joins; on Tansu a leader leaves by silence (`leave()` says why);
- `solo_since_ms` > 0 makes it a watcher for a plain `kcoord serve` (balancer.py): it never
  gets shards, and `run()` raises `NotAlone` naming the others once the leader says that
  another kcoord serves the same state topic. Its lease is its process's (solo.py): a
  watcher whose lease ran out, or that lost its membership, joins again as a *candidate*
  (`candidate_since`), since another plain serve may have been admitted meanwhile; one
  that serves heartbeats on a second link during a rebalance, as a member with shards does;
- losing the membership (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, or the lease running out
  while heartbeats fail) drops every shard and the lease at once (Kafka's
  `onPartitionsLost`), before rejoining; FENCED_INSTANCE_ID (another process took our
  instance id) does the same and stops the member for good;
- holds: a shard added while this process is *fresh* (within a session of its first
  JoinGroup: it may have replaced a live process with its instance id, KIP-345), or one
  the leader assigned with `hold` (balancer.py), is served only a session later
  (`hold_until`, monotonic seconds), when the previous owner's lease has certainly run out;
- the map must carry this process's own endpoint: an assignment naming another (Kafka
  replaced a static member in a stable group without a rebalance and handed back the old
  process's assignment, whose map has its address) makes it rejoin at once with its own
  metadata, which differs from what Kafka stored, so Kafka rebalances and every member gets
  the new address (GroupMetadataManager: a stable group's follower rejoining with changed
  metadata starts a rebalance).

Parts, each an object or function of its own: the shards held and their holds
(ownership.py), the leader's balance of a JoinGroup answer (leader.py), the heartbeat timer
and the side heartbeats (heartbeat.py), the lease (lease.py), finding the group's coordinator
(finding.py).

`on_change(assignment, added, revoked)` is called with each applied assignment; the lease
(lease.py) is renewed by each successful JoinGroup/SyncGroup/Heartbeat, timed from when
the request was sent.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v3 import request as heartbeat_v3
from kio.schema.join_group.v5 import request as join_v5
from kio.schema.leave_group.v3 import request as leave_v3
from kio.schema.sync_group.v3 import request as sync_v3
from kio.schema.types import GroupId
from kio.static.primitive import i32

from ..aio import within
from .finding import find_coordinator
from .heartbeat import Heartbeat, SideHeartbeats
from .leader import lead
from .lease import Lease
from .ownership import ShardOwnership
from .protocol import (
    PROTOCOL_NAME,
    PROTOCOL_TYPE,
    Assignment,
    Endpoint,
    MalformedMembershipData,
    decode_assignment,
)
from .upstream import (
    Link,
    Lost,
    MembershipFenced,
    MembershipRefused,
    NotAlone,
    OpenLink,
    Refind,
    Rejoin,
    group_name,
    ms_field,
    raise_for,
    static_membership_works,
)

__all__ = ["ClusterMembership", "MembershipFenced", "MembershipRefused", "NotAlone", "group_name",
           "static_membership_works"]

log = logging.getLogger("kcoord.cluster")


_BACKOFF_S = 0.2
_MAX_BACKOFF_S = 5.0


class ClusterMembership:
    def __init__(self, *, group_id: str, instance_id: str, endpoint: Endpoint, n_shards: int,
                 open_link: OpenLink, bootstrap: Sequence[tuple[str, int]],
                 on_change: Callable[[Assignment, frozenset[int], frozenset[int]], None],
                 session_ms: int = 10_000, rebalance_ms: int = 30_000, heartbeat_ms: int = 1_000,
                 lease_margin_ms: int = 2_000, static: bool | None = True, rack: str | None = None,
                 clock: Callable[[], float] = time.monotonic, request_timeout_s: float = 10.0,
                 solo_since_ms: int = 0, on_candidate: Callable[[], None] | None = None) -> None:
        self.group_id = group_id
        self.instance_id = instance_id
        self.endpoint = endpoint
        self.n_shards = n_shards
        self._open_link = open_link
        self._bootstrap = list(bootstrap)
        self._on_change = on_change
        self.session_ms = session_ms
        self.rebalance_ms = rebalance_ms
        self.heartbeat_ms = heartbeat_ms
        self.static = bool(static)
        self._static_auto = static is None     # decided by the upstream's ApiVersions, once
        self.solo_since_ms = solo_since_ms
        self.solo_candidate = solo_since_ms > 0     # a watcher checks the group before its process serves
        self.candidate_since = clock()              # when it last became a candidate (monotonic s)
        self._on_candidate = on_candidate           # told when a watcher that served becomes one again
        self.tansu = False     # the upstream's group coordinator is Tansu's (known once `static` is decided)
        self.rack = rack
        self._clock = clock
        self._timeout = request_timeout_s
        self.lease = Lease(session_ms, lease_margin_ms)
        self.ownership = ShardOwnership(instance_id, endpoint, session_ms, solo_since_ms=solo_since_ms, rack=rack)
        self.member_id = ""
        self.generation = -1
        self.leader = False
        self.rebalances = 0
        self._link: Link | None = None
        self._coordinator: tuple[str, int] | None = None
        self._stopping = False
        self.heartbeat = Heartbeat(heartbeat_ms, session_ms)
        self.stable = asyncio.Event()     # set while the member holds a current assignment

    # ------------------------------------------------------------------ api
    async def run(self) -> None:
        """Stay in the group until `leave()` (or fencing); retries every other failure."""
        backoff = _BACKOFF_S
        while not self._stopping:
            try:
                if self._link is None:
                    self._link = await self._find_coordinator()
                await self._join_and_sync()
                backoff = _BACKOFF_S
                await self._heartbeat_until_rebalance()
            except Rejoin:
                continue
            except Refind:
                self._drop_link()
            except MembershipFenced:
                self._lose("fenced: another process joined with instance id " + self.instance_id)
                raise
            except (NotAlone, MembershipRefused):
                self.stable.clear()
                raise
            except asyncio.CancelledError:
                raise
            except Exception as e:   # a link failure, a timeout: the upstream is not ours to trust
                if self._stopping:
                    break
                log.warning("cluster membership %s: %s; retrying in %.1fs", self.instance_id, e, backoff)
                self._drop_link()
                self._check_lease()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF_S)

    async def leave(self) -> None:
        """Leave the group now (a scale-down): the shards move without a session timeout."""
        self._stopping = True
        if self.solo_since_ms and self.leader and not self.stable.is_set() and self._link is not None:
            # A watcher that leads a generation still forming (its rejoin once it serves):
            # let it form first, bounded (Tansu holds a JoinGroup session/2), since a leader
            # leaving a forming Tansu group wedges it (below): seen, a plain serve stopped
            # right after its start left the next one waiting for a verdict.
            try:
                await within(self.stable.wait(), self.session_ms / 2000 + 2)
            except TimeoutError:
                pass
        link, member = self._link, self.member_id
        if link is not None and self.leader and self.tansu:
            # Tansu 0.6 keeps a leader that leaves a forming group as its leader
            # (`Inner<Forming>::leave`, administrator.rs:2404-2465, never clears
            # `state.leader`): every later JoinGroup names the departed member, nobody may
            # sync, and the group never forms again (seen). Only an eviction clears it
            # (line 1561), so a leader goes silent and the others evict it after the session.
            log.info("cluster membership %s: leaving %s by silence (a leader's LeaveGroup would wedge Tansu's "
                     "group); its shards move after the session timeout", self.instance_id, self.group_id)
            link = None
        if link is not None and (member or self.static):
            try:
                await link.request(leave_v3.LeaveGroupRequest(
                    group_id=GroupId(self.group_id), members=(leave_v3.MemberIdentity(
                        member_id=member, group_instance_id=self.instance_id if self.static else None),)),
                    self._timeout)
            except Exception as e:
                log.warning("cluster membership %s: LeaveGroup failed: %s", self.instance_id, e)
        self._lose("left the group")
        self._drop_link()

    def shard_lost(self, shard: int) -> None:
        """A shard this member was assigned was taken by another process (its writes were
        fenced): stop claiming it and rejoin now, so the leader's map is right again (a
        fenced owner unloads and rejoins, docs/user/cluster.md, the safety argument)."""
        if self.ownership.give_up(shard):
            # Another process may have taken this instance id (a static replacement): answer
            # nothing until the group says this process is still a member (the rejoin renews
            # the lease) or that it was replaced (FENCED_INSTANCE_ID).
            self.lease.drop()
            self.request_rejoin()

    def request_rejoin(self) -> None:
        """Join again now (with this member's current metadata), not at the next heartbeat."""
        self.heartbeat.request_rejoin()

    def fresh(self, now: float | None = None) -> bool:
        """Within a session of this process's first JoinGroup answer: the process it may have
        replaced (same instance id) may still hold a lease."""
        return self.ownership.fresh(self._ms(now))

    def serving(self, now: float | None = None) -> bool:
        """Whether this instance may answer for its shards now (the lease holds)."""
        return self.lease.valid(self._ms(now))

    # ------------------------------------------------------------- protocol
    async def _find_coordinator(self) -> Link:
        found = await find_coordinator(self._open_link, self._bootstrap, self.group_id, self._timeout,
                                       self._static_auto)
        if found.static is not None:
            self.static, self.tansu, self._static_auto = found.static, not found.static, False
            log.info("cluster membership %s: joining %s as a %s member%s", self.instance_id, self.group_id,
                     "static" if self.static else "dynamic", "" if self.static else
                     " (the upstream does not list OffsetForLeaderEpoch: Tansu, whose group coordinator cannot "
                     "carry static members; a restart rebalances)")
        self._coordinator = found.address
        return found.link

    def _metadata(self) -> bytes:
        return self.ownership.metadata(solo_candidate=self.solo_candidate, static=self.static, now_ms=self._ms())

    async def _join_and_sync(self) -> None:
        # A dynamic member holding shards heartbeats on a second link while its JoinGroup and
        # SyncGroup are held (Tansu holds JoinGroup session/2 and polls SyncGroup each 1 s,
        # administrator.rs:924 and :1118): NONE or REBALANCE_IN_PROGRESS prove it is still a
        # member, so its lease, and the shards it keeps through a cooperative rebalance, do
        # not lapse while it waits (as the Java client's heartbeat thread keeps its session).
        side = None
        keeps = bool(self.ownership.owned) or (self.solo_since_ms > 0 and not self.solo_candidate)
        if not self.static and self.member_id and keeps and self._coordinator is not None:
            side = SideHeartbeats(
                self._open_link, self._coordinator, self.heartbeat.interval_ms(self.static) / 1000,
                lambda: heartbeat_v3.HeartbeatRequest(group_id=GroupId(self.group_id),
                                                      generation_id=i32(self.generation), member_id=self.member_id,
                                                      group_instance_id=None),
                self.lease, self._ms, self._timeout, self.instance_id)
        try:
            await self._join_and_sync_once()
        finally:
            if side is not None:
                await side.stop()

    async def _join_and_sync_once(self) -> None:
        assert self._link is not None
        self.stable.clear()
        sent = self._ms()
        if self.solo_since_ms and not self.solo_candidate and self.lease.renewed_ms is not None \
                and not self.lease.valid(sent):
            self._become_candidate("its lease ran out")
        while True:
            sent = self._ms()
            resp = await self._link.request(join_v5.JoinGroupRequest(
                group_id=GroupId(self.group_id), session_timeout=ms_field(self.session_ms),
                rebalance_timeout=ms_field(self.rebalance_ms), member_id=self.member_id,
                group_instance_id=self.instance_id if self.static else None, protocol_type=PROTOCOL_TYPE,
                protocols=(join_v5.JoinGroupRequestProtocol(name=PROTOCOL_NAME, metadata=self._metadata()),)),
                self.rebalance_ms / 1000 + self._timeout)
            code = resp.error_code
            log.debug("cluster membership %s: JoinGroup -> %s member %s generation %s leader %s", self.instance_id,
                      code.name, resp.member_id, resp.generation_id, resp.leader)
            if code == ErrorCode.member_id_required:
                self.member_id = resp.member_id       # KIP-394: join again with it
                continue
            self._check(code, "JoinGroup")
            break
        self.ownership.joined(self._ms())
        self.lease.renew(sent)
        self.member_id, self.generation = resp.member_id, resp.generation_id
        self.leader = resp.leader == resp.member_id
        assignments: tuple = ()
        if self.leader:
            assignments = self._lead(resp.generation_id, resp.members)
        sent = self._ms()
        sync = await self._link.request(sync_v3.SyncGroupRequest(
            group_id=GroupId(self.group_id), generation_id=i32(self.generation), member_id=self.member_id,
            group_instance_id=self.instance_id if self.static else None, assignments=assignments),
            self._timeout)
        self._check(sync.error_code, "SyncGroup")
        self.lease.renew(sent)
        try:
            assignment = decode_assignment(sync.assignment)
        except MalformedMembershipData as e:
            log.error("cluster membership %s: the leader's assignment is unreadable (%s); rejoining",
                      self.instance_id, e)
            await asyncio.sleep(_BACKOFF_S)
            raise Rejoin() from None
        self._apply(assignment)

    def _lead(self, generation: int, members) -> tuple:
        self.rebalances += 1
        return lead(self.instance_id, generation, self.n_shards, members, self.ownership.previous_owners(generation))

    def _apply(self, assignment: Assignment) -> None:
        added, revoked = self.ownership.apply(assignment, self._ms())
        self._on_change(assignment, added, revoked)
        # Cooperative: revoked shards are placed in the next generation, which this member
        # starts by rejoining now that it no longer serves them.
        if revoked or self.ownership.names_another_endpoint(assignment):
            raise Rejoin()
        self.stable.set()

    async def _heartbeat_until_rebalance(self) -> None:
        assert self._link is not None
        while not self._stopping:
            rejoin = await self.heartbeat.next(self.static)
            if self._stopping:
                return
            if rejoin:
                log.debug("cluster membership %s: rejoining generation %d (asked for)", self.instance_id,
                          self.generation)
                raise Rejoin()
            sent = self._ms()
            resp = await self._link.request(heartbeat_v3.HeartbeatRequest(
                group_id=GroupId(self.group_id), generation_id=i32(self.generation), member_id=self.member_id,
                group_instance_id=self.instance_id if self.static else None), self._timeout)
            log.debug("cluster membership %s: Heartbeat generation %d -> %s after %.0f ms", self.instance_id,
                      self.generation, resp.error_code.name, self._ms() - sent)
            if resp.error_code == ErrorCode.rebalance_in_progress:
                self.lease.renew(sent)      # still a member: keep serving through the rebalance
                log.info("cluster membership %s: generation %d rebalancing (Heartbeat: REBALANCE_IN_PROGRESS)",
                         self.instance_id, self.generation)
                raise Rejoin()
            self._check(resp.error_code, "Heartbeat")
            self.lease.renew(sent)

    def _check(self, code: ErrorCode, api: str) -> None:
        try:
            raise_for(code, api, self.group_id, self.instance_id, self.session_ms)
        except Lost:
            self._lose(f"{api} answered {code.name}")
            if code == ErrorCode.unknown_member_id:
                self.member_id = ""      # join as new (a static member is recognised by its instance id)
            raise

    # --------------------------------------------------------------- helpers
    def _lose(self, why: str) -> None:
        self.stable.clear()
        self.lease.drop()        # answer nothing more from this membership's state
        if self.solo_since_ms and not self.solo_candidate and not self._stopping:
            self._become_candidate(why)
        lost = self.ownership.drop()
        if lost:
            log.warning("cluster membership %s: %s; dropping shards %s", self.instance_id, why, sorted(lost))
            empty = self.ownership.assignment = Assignment(self.generation, frozenset(), {}, {}, {})
            self._on_change(empty, frozenset(), lost)
            # Generations may pass without this member: its map is no previous map to lead by.
            self.ownership.assignment = None
        self.generation = -1

    def _become_candidate(self, why: str) -> None:
        """A watcher whose process served: it no longer knows that no other plain serve was
        admitted meanwhile, so it asks the group again as a candidate (solo.py)."""
        log.warning("cluster membership %s: %s; checking the group again before serving (its process answers "
                    "NOT_COORDINATOR meanwhile, if the group had admitted it)", self.instance_id, why)
        self.solo_candidate = True
        self.candidate_since = self._clock()
        if self._on_candidate is not None:
            self._on_candidate()

    def _check_lease(self) -> None:
        if self.ownership.owned and not self.lease.valid(self._ms()):
            self._lose("the membership lease ran out")

    def _drop_link(self) -> None:
        if self._link is not None:
            self._link.close()
            self._link = None

    def _ms(self, now: float | None = None) -> float:
        return (self._clock() if now is None else now) * 1000
