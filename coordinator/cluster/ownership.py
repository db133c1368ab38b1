"""Which shards this kcoord process holds in its membership group, since which generation,
and which of them it must not serve yet (ClusterMembership's part; pure: the caller passes
the monotonic time in ms, nothing here does I/O).

Rules (membership.py's module docstring gives the reasons):
- an applied assignment replaces `owned`; `owned_since` is the generation that last changed
  it (the age of this member's claim, sent in its metadata);
- holds: a shard added while the process is fresh (within a session of its first JoinGroup
  answer: it may have replaced a live process with its instance id, KIP-345), or one the
  leader marked `hold`, is served only a session later (`hold_until`, monotonic seconds);
- an assignment naming this process at another endpoint (a static member replaced without a
  rebalance) asks for one rejoin per generation, so every member learns the address;
- losing the membership drops every shard, every hold and the map (no previous map to lead by).
"""
from __future__ import annotations

import logging
from collections.abc import Mapping

from .balancer import NOT_ALONE
from .protocol import Assignment, Endpoint, MemberMetadata, encode_metadata
from .upstream import MembershipFenced, NotAlone

log = logging.getLogger("kcoord.cluster")


class ShardOwnership:
    def __init__(self, instance_id: str, endpoint: Endpoint, session_ms: int, *, solo_since_ms: int = 0,
                 rack: str | None = None) -> None:
        self.instance_id = instance_id
        self.endpoint = endpoint
        self.session_ms = session_ms
        self.solo_since_ms = solo_since_ms
        self.rack = rack
        self.owned: frozenset[int] = frozenset()
        self.owned_since = -1    # the generation that assigned `owned` (sent as its claim's age)
        self.assignment: Assignment | None = None
        self.node_id = -1
        self.fresh_until_ms: float | None = None   # first JoinGroup answer + session (monotonic ms)
        self.hold_until: dict[int, float] = {}      # shard -> monotonic s before which it is not served
        self._refreshed_for = -1      # the generation whose stale map of us made us rejoin

    def joined(self, now_ms: float) -> None:
        """A JoinGroup was answered. The broker replaced any earlier process with this
        instance id before answering, so that process's last renewal was sent before now:
        its lease ends within a session."""
        if self.fresh_until_ms is None:
            self.fresh_until_ms = now_ms + self.session_ms

    def fresh(self, now_ms: float) -> bool:
        return self.fresh_until_ms is None or now_ms < self.fresh_until_ms

    def metadata(self, *, solo_candidate: bool, static: bool, now_ms: float) -> bytes:
        """This member's JoinGroup metadata. The claim's generation is the one that assigned
        `owned`, not the current one: the balancer needs only which of two claims is newer,
        and metadata that does not change when nothing moved lets a rejoin leave Tansu's
        group as it is (a changed one starts a generation: administrator.rs:2716) instead of
        costing a rebalance. `fresh` only from a static member: only static membership
        replaces a member in place (a dynamic duplicate is refused by the balancer, and the
        older member, if it loses, stops at the same SyncGroup). On Tansu a changed `fresh`
        would start a generation."""
        return encode_metadata(MemberMetadata(self.instance_id, self.endpoint, self.rack, self.owned,
                                              self.node_id, self.owned_since, self.solo_since_ms,
                                              solo_candidate, static and self.fresh(now_ms)))

    def previous_owners(self, generation: int) -> Mapping[int, str] | None:
        """The previous generation's map, if this member applied it (not at start, after a
        loss, or when a failed SyncGroup skipped one): else the balancer holds more."""
        a = self.assignment
        return a.owners if a is not None and a.endpoints and a.generation == generation - 1 else None

    def apply(self, assignment: Assignment, now_ms: float) -> tuple[frozenset[int], frozenset[int]]:
        """Take ``assignment``; returns (added, revoked). Raises NotAlone (a watcher's
        verdict) or MembershipFenced (the leader refused this instance id)."""
        if assignment.error == NOT_ALONE and self.solo_since_ms:
            raise NotAlone(dict(assignment.endpoints))
        if assignment.error:
            raise MembershipFenced(f"the leader refused instance id {self.instance_id} "
                                   f"(error {assignment.error}: another member uses it)")
        added, revoked = assignment.shards - self.owned, self.owned - assignment.shards
        if added or revoked:
            self.owned_since = assignment.generation
        self._hold(assignment.shards, added, assignment.hold, now_ms)
        self.assignment, self.owned = assignment, assignment.shards
        self.node_id = assignment.node_ids.get(self.instance_id, self.node_id)
        return added, revoked

    def names_another_endpoint(self, assignment: Assignment) -> bool:
        """The map names this instance at another address (once per generation): rejoin."""
        mine = assignment.endpoints.get(self.instance_id)
        if self.solo_since_ms or mine is None or mine == self.endpoint \
                or assignment.generation == self._refreshed_for:
            return False
        self._refreshed_for = assignment.generation
        log.info("cluster membership %s: generation %d names this instance at %s:%d, not %s:%d (a static "
                 "member replaced without a rebalance); rejoining so every member learns the address",
                 self.instance_id, assignment.generation, mine.host, mine.port, self.endpoint.host,
                 self.endpoint.port)
        return True

    def _hold(self, shards: frozenset[int], added: frozenset[int], marked: frozenset[int], now_ms: float) -> None:
        self.hold_until = {s: t for s, t in self.hold_until.items() if s in shards and t * 1000 > now_ms}
        fresh_until_ms = self.fresh_until_ms or 0.0
        for shard in added:
            until_ms = max(fresh_until_ms, now_ms + self.session_ms if shard in marked else 0.0)
            if until_ms > now_ms:
                self.hold_until[shard] = until_ms / 1000

    def give_up(self, shard: int) -> bool:
        """Stop claiming ``shard`` (another process took it); False if it was not ours."""
        if shard not in self.owned:
            return False
        self.owned = self.owned - {shard}
        return True

    def drop(self) -> frozenset[int]:
        """The membership is lost: every shard, hold and the map go; returns the shards dropped."""
        self.hold_until.clear()
        lost, self.owned = self.owned, frozenset()
        if lost:
            self.owned_since = -1
        self.assignment = None
        return lost
