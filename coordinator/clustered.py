"""`kcoord serve --instance-id NAME`: one process of a kcoord cluster (docs/user/cluster.md).

The wiring only; the parts live elsewhere:
- membership: coordinator/cluster/membership.py (a classic group `kcoord.<state topic>` on
  the upstream, static by instance id unless the upstream is Tansu), whose assignments
  drive coordinator/cluster/node.py;
- exclusive writes: coordinator/runtime/fenced_state_log.py (a transactional id per shard;
  taking a shard bumps its producer epoch and, with fencing=epoch, writes a fence record
  under it, which fences its previous owner at the partition: docs/design/fencing.md);
- the service serves only the shards assigned here (`GroupCoordinatorService.take/release`)
  and releases no response once the membership lease ran out;
- the gateway names shard owners in FindCoordinator and every instance's synthetic node in
  Metadata, and sends each upstream broker's traffic through one instance (node.py);
- the per-group config requests Kafka's Admin sends to any instance reach the owner of each
  group's shard over the instances' links to each other (cluster/peers.py), opened to the
  peer's first listener as a client would: PLAINTEXT when this instance's first listener is,
  else with the upstream's TLS and SASL settings (docs/user/cluster.md).

Rules:
- Fencing is what makes several processes safe: `fencing=epoch` (the default here: fence
  by writing) or `fencing=transactional` (a transaction per append).
  `fencing=none` writes as one process does; such a process refuses to serve once its
  membership group holds a second instance (it exits with EXIT_NOT_ALONE), since nothing
  would stop two writers.
- A plain `kcoord serve` (no --instance-id, fencing none) runs a `SoloWatch`: before it
  loads anything it joins the same group as a candidate watcher that takes no shard, and
  exits with EXIT_NOT_ALONE when the group also holds another kcoord, once that other
  member is still there a full session after the watch became a candidate (a kill -9'd
  predecessor's ghost is gone by then). Admitted, the process holds the watch's lease as a
  cluster member holds its own: no response and no state write once it ran out
  (cluster/solo.py); a watch that cannot run leaves it unwatched, without a lease.
  `--config cluster.solo.check=false` turns it off.
- Shutdown (SIGTERM) is a scale-down: each shard's write in flight is finished (bounded),
  then the process leaves the group by instance id (LeaveGroup v3), so its shards move at
  once. A crash or kill -9 is a restart: the static member keeps its shards until the
  membership session timeout, and a restart within it gets them back without a rebalance.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import os
import socket
import time
from typing import Any

from . import metrics
from .aio import within
from .cluster.membership import ClusterMembership, MembershipFenced, NotAlone, group_name
from .cluster.node import ClusterNode, endpoint_of
from .cluster.peers import PEER_CLIENT_ID, Peers
from .cluster.protocol import Assignment
from .cluster.solo import LeaseGatedLog, SoloLease
from .config import CoordinatorConfig

log = logging.getLogger("kcoord.cluster")

EXIT_NOT_ALONE = 4          # fencing=none and a second instance joined
EXIT_MEMBERSHIP_FENCED = 5  # another process uses this instance id
FENCING_MODES = ("transactional", "epoch", "none")
DEFAULT_FENCING = "epoch"    # with --instance-id; "transactional" stays selectable (docs/user/cluster.md)
DRAIN_TIMEOUT_S = 10.0
SOLO_DRAIN_TIMEOUT_S = 5.0   # inside the shutdown's 10 s step for the watch, with the LeaveGroup after it


def fencing_mode(config: CoordinatorConfig) -> str:
    mode = (config.fencing or DEFAULT_FENCING).strip().lower()
    if mode not in FENCING_MODES:
        raise ValueError(f"--config fencing={config.fencing!r}: expected one of {', '.join(FENCING_MODES)}")
    return mode


def static_membership(config: CoordinatorConfig) -> bool | None:
    """`cluster.static.membership`: None for auto (decided from the upstream's ApiVersions)."""
    value = (config.cluster_static_membership or "auto").strip().lower()
    choices = {"auto": None, "true": True, "false": False}
    if value not in choices:
        raise ValueError(f"--config cluster.static.membership={config.cluster_static_membership!r}: "
                         "expected auto, true or false")
    return choices[value]


async def _open(security: Any, client_id: str, addresses):
    from .upstream.client import UpstreamClient
    return await UpstreamClient.connect(addresses, client_id=client_id, security=security)


def _bootstrap(upstream: str) -> list[tuple[str, int]]:
    out = []
    for item in upstream.split(","):
        host, _, port = item.strip().rpartition(":")
        out.append((host, int(port)))
    return out


class ClusterProcess:
    """The cluster side of one `kcoord serve --instance-id` process."""

    def __init__(self, config: CoordinatorConfig, instance_id: str, upstream: str, upstream_security: Any) -> None:
        self.config = config
        self.instance_id = instance_id
        self.upstream = upstream
        self.security = upstream_security
        self.fencing = fencing_mode(config)
        self.static = static_membership(config)
        self.membership: ClusterMembership | None = None
        self.node: ClusterNode | None = None
        self.exit_code: int | None = None
        self.stop = asyncio.Event()           # set when this process must stop (fenced, not alone)
        self._task: asyncio.Task | None = None
        self._service: Any = None
        self.peers: Peers | None = None

    def state_log(self, plain_writer: Any) -> Any:
        """The StateLog the service writes through: a fenced one (transactional, or epoch:
        docs/design/fencing.md), or the plain writer (fencing=none)."""
        if self.fencing == "none":
            return plain_writer
        from .runtime.fenced_state_log import FencedStateLog
        return FencedStateLog(self.upstream, self.config.state_topic, self.config.state_topic_partitions,
                              functools.partial(_open, self.security, f"kcoord-state-{self.instance_id}"),
                              owns=self._may_write, fencing=self.fencing)

    def _may_write(self, partition: int) -> bool:
        """Checked before every send to the state log (take, append, fence, keep-alive): the
        shard is assigned here AND the membership lease holds. A process paused past its
        lease sends nothing when it wakes, not only answers nothing (docs/design/fencing.md)."""
        return (self.node is not None and self.node.owns(partition)
                and self.membership is not None and self.membership.serving())

    async def start(self, service: Any, gateway: Any, first_assignment_timeout_s: float) -> None:
        """Join the membership group; returns once the first assignment was applied (its
        shards start loading) or the timeout passed (the process keeps trying)."""
        c = self.config
        self._service = service
        membership = self.membership = ClusterMembership(
            group_id=group_name(c.state_topic), instance_id=self.instance_id, endpoint=endpoint_of(gateway.listeners),
            n_shards=c.state_topic_partitions,
            open_link=functools.partial(_open, self.security, f"kcoord-cluster-{self.instance_id}"),
            bootstrap=_bootstrap(self.upstream), on_change=self._on_change,
            session_ms=c.cluster_session_timeout_ms, rebalance_ms=c.cluster_rebalance_timeout_ms,
            heartbeat_ms=c.cluster_heartbeat_interval_ms, lease_margin_ms=c.cluster_lease_margin_ms,
            static=self.static)
        node = self.node = ClusterNode(self.instance_id, service, membership.serving)
        self.peers = service.group_config_peers = Peers(
            self.instance_id, node, functools.partial(_open, self._peer_security(gateway.listeners), PEER_CLIENT_ID),
            timeout_s=c.offsets_commit_timeout_ms / 1000 + c.cluster_session_timeout_ms / 1000)
        metrics.CLUSTER_LEASE_REMAINING.set_function(
            lambda: membership.lease.remaining_ms(time.monotonic() * 1000) / 1000)
        # The readiness gauge (ops/deploy/probe.py): 0 once the lease ran out.
        metrics.SERVING.set_function(lambda: 1.0 if membership.serving() else 0.0)
        service.enter_cluster_mode(membership.serving, c.cluster_session_timeout_ms)
        for rt in service.runtimes:
            rt.on_fenced = self._fenced
        gateway.peers = node
        self._task = asyncio.get_running_loop().create_task(self._run(), name="kcoord-cluster-membership")
        try:
            await within(membership.stable.wait(), first_assignment_timeout_s)
        except TimeoutError:
            log.warning("kcoord instance %s: no assignment from membership group %s after %.0fs; serving "
                        "no shard until one arrives", self.instance_id, membership.group_id,
                        first_assignment_timeout_s)

    def _peer_security(self, listeners: Any) -> Any:
        """How this instance reaches the others' first listener (cluster/peers.py): in the clear
        when its own first listener is PLAINTEXT (the instances share one configuration), else
        with the upstream's TLS and SASL settings, which that listener must then accept."""
        first = next((i for i in listeners if i.node_id is None), None)
        if first is None or first.security_protocol == "PLAINTEXT":
            return None
        upstream = getattr(self.security, "protocol", "PLAINTEXT")
        if upstream != first.security_protocol:
            log.warning("kcoord instance %s: its first listener is %s and the upstream %s: config requests for "
                        "other instances' groups reach them with the upstream's settings and will fail; give the "
                        "first listener the upstream's security protocol (docs/user/cluster.md)", self.instance_id,
                        first.security_protocol, upstream)
        return self.security

    def _on_change(self, assignment: Assignment, added: frozenset[int], revoked: frozenset[int]) -> None:
        if self.fencing == "none" and len(assignment.endpoints) > 1 and self.exit_code is None:
            others = sorted(i for i in assignment.endpoints if i != self.instance_id)
            log.error("kcoord instance %s runs with fencing=none, but membership group %s also holds %s: "
                      "nothing would keep two processes from writing the same shard. Stopping; run every "
                      "process with fencing=epoch (the default)", self.instance_id,
                      group_name(self.config.state_topic), ", ".join(others))
            self.exit_code = EXIT_NOT_ALONE
            self.stop.set()
            assignment = Assignment(assignment.generation, frozenset(), assignment.owners, assignment.endpoints,
                                    assignment.node_ids)
            added, revoked = frozenset(), revoked | (self.node.assignment.shards if self.node and
                                                     self.node.assignment else frozenset())
        assert self.node is not None and self.membership is not None
        hold_until = self.membership.ownership.hold_until
        held = frozenset(s for s in added if s in hold_until)
        self.node.on_change(assignment, added, revoked, held)
        if self.peers is not None:
            self.peers.on_map(assignment)
        if held:
            # The previous owner may still answer these (a static replacement, or this
            # process's first session): serve them once its lease has certainly run out.
            log.info("kcoord instance %s: shards %s wait up to %.1fs before serving (their previous owner may "
                     "still hold a lease)", self.instance_id, sorted(held),
                     max(hold_until[s] for s in held) - time.monotonic())
            self._serve_held(held)
        metrics.CLUSTER_GENERATION.set(assignment.generation)
        metrics.CLUSTER_INSTANCES.set(len(assignment.endpoints))
        metrics.CLUSTER_SHARDS.set(len(assignment.shards))
        metrics.CLUSTER_NODE_ID.set(self.node.node_id())
        if added:
            metrics.CLUSTER_SHARD_MOVES.labels(direction="in").inc(len(added))
        if revoked:
            metrics.CLUSTER_SHARD_MOVES.labels(direction="out").inc(len(revoked))

    def _serve_held(self, shards: frozenset[int]) -> None:
        """Serve those of `shards` whose hold is over; check again at the next hold's end
        (a shard revoked and assigned again meanwhile has a newer hold)."""
        if self.node is None or self.membership is None:
            return
        now = time.monotonic()
        hold_until = self.membership.ownership.hold_until
        due = frozenset(s for s in shards if hold_until.get(s, 0.0) <= now)
        if self.node.serve_held(due):
            log.info("kcoord instance %s: serving held shards %s", self.instance_id, sorted(due))
        waiting = shards & self.node.held
        if waiting:
            wake = min(hold_until.get(s, now) for s in waiting)
            asyncio.get_running_loop().call_later(max(0.0, wake - now) + 0.005, self._serve_held, waiting)

    def _fenced(self, partition: int, error: Exception) -> None:
        """A write of a shard assigned here was refused: another process took it (fenced),
        or this process's lease ran out before the send. The runtime unloaded it; the
        membership stops claiming it and rejoins."""
        log.warning("kcoord instance %s: shard %d unloaded, its write was refused (%s); rejoining",
                    self.instance_id, partition, error)
        if self.membership is not None:
            self.membership.shard_lost(partition)
        owned = getattr(self._service, "owned", None)
        if owned is not None:
            owned.discard(partition)

    async def _run(self) -> None:
        assert self.membership is not None
        try:
            await self.membership.run()
        except MembershipFenced as e:
            log.error("kcoord instance %s stops: %s", self.instance_id, e)
            self.exit_code = EXIT_MEMBERSHIP_FENCED
            self.stop.set()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("kcoord instance %s: cluster membership failed", self.instance_id)
            self.exit_code = EXIT_MEMBERSHIP_FENCED
            self.stop.set()

    async def leave(self, service: Any) -> None:
        """Scale-down: finish the writes in flight, then leave the group by instance id."""
        if self.membership is None:
            return
        drains = [rt.drain(DRAIN_TIMEOUT_S) for rt in service.runtimes]
        if drains:
            await asyncio.gather(*drains, return_exceptions=True)
        if self._task is not None and not self._task.done():
            await self.membership.leave()
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self.peers is not None:
            self.peers.close()



class SoloWatch:
    """A plain `kcoord serve`'s watch for a second kcoord on its state topic (several processes:
    `fencing=none` refuses to run when a second process is seen), and the lease it gives the
    process (cluster/solo.py).

    `check()` runs before the process loads or answers anything: it joins as a *candidate*
    and waits for the leader's verdict. A candidate yields to every process already serving
    (balancer.py), so of two plain serves started together only one ever serves. Admitted,
    the process answers and writes only while the watch's lease holds (`serving`, the
    service's gate, and `gated`, its state log's); a watcher whose lease ran out is a
    candidate again, and its process serves again only once admitted and reloaded."""

    def __init__(self, config: CoordinatorConfig, upstream: str, upstream_security: Any) -> None:
        self.config = config
        self.upstream = upstream
        self.security = upstream_security
        self.instance_id = f"solo-{socket.gethostname()}-{os.getpid()}"
        self.membership: ClusterMembership | None = None
        self.lease: SoloLease | None = None
        self.exit_code: int | None = None
        self.stop = asyncio.Event()     # set when this process must stop (not alone)
        self._task: asyncio.Task | None = None
        self._service: Any = None       # set once the process serves
        self._reload: asyncio.Task | None = None
        self._verdict_timeout_s = 0.0   # how long a candidate waits for a verdict before serving unwatched

    def serving(self) -> bool:
        """Whether the process may answer from its shards and write them now (True: no watch)."""
        return self.lease is None or self.lease.serving()

    def gated(self, state_log: Any) -> LeaseGatedLog:
        """`state_log` with every send gated on `serving` (the service writes through it)."""
        return LeaseGatedLog(state_log, self.serving)

    def start(self, gateway: Any) -> None:
        """Join the group as a candidate (in the background; `check` waits for the verdict)."""
        c = self.config
        self.membership = ClusterMembership(
            group_id=group_name(c.state_topic), instance_id=self.instance_id, endpoint=endpoint_of(gateway.listeners),
            n_shards=c.state_topic_partitions,
            open_link=functools.partial(_open, self.security, f"kcoord-solo-{os.getpid()}"),
            bootstrap=_bootstrap(self.upstream), on_change=self._admitted,
            session_ms=c.cluster_session_timeout_ms, rebalance_ms=c.cluster_rebalance_timeout_ms,
            heartbeat_ms=c.cluster_heartbeat_interval_ms, lease_margin_ms=c.cluster_lease_margin_ms,
            static=False, solo_since_ms=int(time.time() * 1000), on_candidate=self._candidate_again)
        self.lease = SoloLease(self.membership)
        self._task = asyncio.get_running_loop().create_task(self._run(), name="kcoord-solo-watch")

    async def check(self, gateway: Any, timeout_s: float, service: Any = None) -> bool:
        """Before serving: False if another kcoord holds the group (the process must exit
        with `exit_code`), True once the leader said this process may serve (it then tells
        the group it serves, and `service` answers only while the lease holds). A watch that
        cannot run (no rights on the group) or no verdict within `timeout_s` lets the process
        serve unwatched, with a warning; a verdict that comes later gives it the lease."""
        self._verdict_timeout_s = timeout_s
        self.start(gateway)
        m, task, lease = self.membership, self._task, self.lease
        assert m is not None and task is not None and lease is not None
        waits = {asyncio.ensure_future(m.stable.wait()), asyncio.ensure_future(self.stop.wait())}
        try:
            await asyncio.wait({*waits, task}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        if self.stop.is_set():
            return False
        self._service = service
        m.solo_candidate = False
        if not m.stable.is_set():
            if not task.done():
                log.warning("kcoord: no verdict from membership group %s after %.0fs; serving, and the watch goes on "
                            "in the background", m.group_id, timeout_s)
            self._gate()
            return True
        # Serving from now on: rejoin so the group ranks this process above any candidate.
        lease.watched = True
        self._gate()
        m.request_rejoin()
        return True

    def _gate(self) -> None:
        """The service's response gate: the lease once watched, none while unwatched (as
        before: no call per request)."""
        service, lease = self._service, self.lease
        if service is not None and lease is not None:
            service.serving = lease.gate()
            metrics.SERVING.set_function(lambda: 1.0 if self.serving() else 0.0)

    def _candidate_again(self) -> None:
        """The watcher is a candidate again (membership.py): no answer until a verdict, and
        without one in the check's time the process serves unwatched (reloaded first)."""
        m = self.membership
        if self._service is None or m is None:
            return
        since = m.candidate_since
        asyncio.get_running_loop().call_later(self._verdict_timeout_s, self._no_verdict, since)

    def _no_verdict(self, since: float) -> None:
        m = self.membership
        if m is None or not m.solo_candidate or m.candidate_since != since or self.stop.is_set():
            return
        log.warning("kcoord: no verdict from membership group %s %.0fs after this process asked again; serving "
                    "unwatched once its shards are reloaded, and the watch goes on in the background", m.group_id,
                    self._verdict_timeout_s)
        self._unwatched()

    def _unwatched(self) -> None:
        """Serve without the lease (the watch cannot say): a process that lost its place
        reloads its shards first, another kcoord may have written them meanwhile."""
        m, lease = self.membership, self.lease
        if m is None or lease is None:
            return
        if lease.watched and m.solo_candidate:
            self._reload_then_serve()
        m.solo_candidate = False
        lease.watched = False
        self._gate()

    def _reload_then_serve(self) -> None:
        assert self.lease is not None
        self.lease.reloading = True
        self._reload = asyncio.get_running_loop().create_task(self._reload_shards(), name="kcoord-solo-reload")

    def _admitted(self, assignment: Assignment, added: frozenset[int], revoked: frozenset[int]) -> None:
        """A verdict that lets this process serve (the leader refused nothing). Before the
        process serves, `check` decides. After: a candidate again (its lease ran out, or the
        group dropped it) reloads every shard before answering; an unwatched process gets
        the lease."""
        m, lease = self.membership, self.lease
        if self._service is None or m is None or lease is None:
            return
        again = m.solo_candidate
        if not again and lease.watched:
            return
        m.solo_candidate = False
        m.request_rejoin()          # tell the group this process serves
        if again and lease.watched:
            log.warning("kcoord: membership group %s admitted this process again; reloading every shard from "
                        "state topic %s before answering (another kcoord may have written it meanwhile)",
                        m.group_id, self.config.state_topic)
            self._reload_then_serve()
        lease.watched = True
        self._gate()

    async def _reload_shards(self) -> None:
        assert self.lease is not None
        try:
            await self._service.reload_all("this plain kcoord serve lost its place in its membership group")
        finally:
            self.lease.reloading = False
            self._gate()

    async def _run(self) -> None:
        m = self.membership
        assert m is not None
        session_s = self.config.cluster_session_timeout_ms / 1000
        while True:
            try:
                await m.run()
                return
            except NotAlone as e:
                # A member killed with -9 stays in the group until its session expires: ask
                # again once a full session has passed since this watch became a candidate.
                wait = m.candidate_since + session_s - time.monotonic()
                if wait <= 0:
                    others = e
                    break
                log.info("kcoord: membership group %s also holds %s; checking again in %.1fs (it may be a "
                         "process that died)", m.group_id, e, wait)
                await asyncio.sleep(wait)
            except asyncio.CancelledError:
                raise
            except Exception as e:      # the watch is a safety net: serving goes on without it
                log.warning("kcoord: the single-process check stopped (%s): a second kcoord on state topic %s "
                            "would not be noticed", e, self.config.state_topic)
                if self._service is not None:
                    self._unwatched()
                return
        log.error("kcoord %s state topic %s as a single process (fencing none), but membership group %s "
                  "also holds %s: two kcoords would both write the same shards. Stopping. Run one plain "
                  "`kcoord serve` per state topic, or every process with --instance-id (a kcoord cluster, "
                  "docs/user/cluster.md)", "would serve" if self._service is None else "serves",
                  self.config.state_topic, m.group_id, others)
        self.exit_code = EXIT_NOT_ALONE
        self.stop.set()
        await self.leave()

    async def leave(self) -> None:
        """Leave the group (shutdown, or after stopping), so the others see it go at once.
        The group may admit a successor as soon as the LeaveGroup lands: before it, the
        process stops answering and sending, and its writes in flight finish (bounded), so
        none lands after the successor's."""
        if self.lease is not None and not self.lease.stopped:
            self.lease.stopped = True
            self._gate()
            if self._service is not None:
                await asyncio.gather(*(rt.drain(SOLO_DRAIN_TIMEOUT_S) for rt in self._service.runtimes),
                                     return_exceptions=True)
        if self.membership is not None:
            await self.membership.leave()
        task, self._task = self._task, None
        if task is not None and task is not asyncio.current_task() and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
