"""One kcoord process of a kcoord cluster: what the membership decided, turned
into which shards this process serves and which address answers for which node id.

It takes the service and the gateway as arguments (duck-typed: this package never imports
the shell), and is driven by `ClusterMembership.on_change`.

Rules:
- **Shards.** The service serves exactly the shards assigned here. A revoked shard is
  unloaded at once (its waiters answer NOT_COORDINATOR) before the member rejoins, so the
  leader gives it away only in the next generation (cooperative, balancer.py). An added
  shard is loaded; the fenced state log's load takes the shard first (InitProducerId),
  which fences the previous owner and aborts its open transaction. A *held* shard (its
  previous owner may still answer: membership.py `hold_until`) is assigned here but
  neither loaded nor served until `serve_held` says its hold is over: until then its
  groups answer NOT_COORDINATOR here and COORDINATOR_NOT_AVAILABLE in FindCoordinator.
- **Addresses.** Every instance answers the same address for the same node id, the rule
  librdkafka and Java key their connections by:
  - a group's coordinator is the owner of its shard, as the owner's synthetic node id
    (`NODE_ID_BASE + ordinal`) at the owner's bootstrap port of the listener the client
    asked on; a shard with no owner (moving) answers COORDINATOR_NOT_AVAILABLE, which
    clients retry;
  - upstream broker N is fronted by one instance: the (N mod k)-th by node id of the k
    instances in the map, at its port for N on that listener. An instance that did not
    report a port for N (a broker that appeared after it joined) falls back to this
    instance's own port for N.
- **Lease.** `serving()` is the membership lease (lease.py): the service checks it before
  releasing any response and the gateway before naming a coordinator, so a process that
  was paused answers nothing from stale state.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from ..protocol.find_coordinator import Node
from .protocol import Assignment, Endpoint, ListenerPorts

log = logging.getLogger("kcoord.cluster")


def endpoint_of(listeners: Any) -> Endpoint:
    """This instance's endpoint from the gateway's open listeners (`Gateway.listeners`): the
    first listener's bootstrap address, and every listener's bootstrap and broker ports."""
    by_name: dict[str, dict[str, Any]] = {}
    for info in listeners:
        name = info.listener
        entry = by_name.setdefault(name, {"host": info.host, "port": 0, "brokers": {}})
        if info.node_id is None:
            entry["host"], entry["port"] = info.host, info.port
        else:
            entry["brokers"][info.node_id] = info.port
    ports = {name: ListenerPorts(e["host"], e["port"], dict(e["brokers"])) for name, e in by_name.items()
             if e["port"]}
    if not ports:
        raise ValueError("no bootstrap listener is open: the instance has no address to give its peers")
    first = next(iter(ports.values()))
    return Endpoint(first.host, first.port, ports)


class ClusterNode:
    def __init__(self, instance_id: str, service: Any, serving: Callable[[], bool]) -> None:
        self.instance_id = instance_id
        self.service = service
        self.serving = serving
        self.assignment: Assignment | None = None
        self._fronts: list[str] = []          # instance ids by node id: broker N -> [N % k]
        self.moves = 0                        # shards added or revoked here since the start
        self.generations = 0
        self.held: frozenset[int] = frozenset()   # assigned, not served until their hold is over

    # ---------------------------------------------------------------- shards
    def on_change(self, assignment: Assignment, added: frozenset[int], revoked: frozenset[int],
                  held: frozenset[int] = frozenset()) -> None:
        self.assignment = assignment
        self._fronts = sorted(assignment.node_ids, key=lambda i: assignment.node_ids[i])
        self.generations += 1
        self.held = (self.held | (added & held)) & assignment.shards
        if revoked:
            self.service.release(revoked, f"moved away from kcoord instance {self.instance_id}")
        if added - held:
            self.service.take(added - held)
        self.moves += len(added) + len(revoked)
        if added or revoked:
            log.info("kcoord instance %s, generation %d: serves %d shards (+%d -%d)", self.instance_id,
                     assignment.generation, len(assignment.shards), len(added), len(revoked))

    def serve_held(self, shards: frozenset[int]) -> frozenset[int]:
        """The hold of `shards` is over: load those still assigned and held here."""
        ready = shards & self.held
        self.held -= ready
        if ready:
            self.service.take(ready)
        return ready

    def owns(self, partition: int) -> bool:
        a = self.assignment
        return a is not None and partition in a.shards

    # ------------------------------------------------------------- addresses
    def node_id(self, instance: str | None = None) -> int:
        a = self.assignment
        if a is None:
            return -1
        return a.node_ids.get(instance or self.instance_id, -1)

    def _listener(self, instance: str, listener: str) -> ListenerPorts | None:
        a = self.assignment
        if a is None:
            return None
        endpoint = a.endpoints.get(instance)
        if endpoint is None:
            return None
        return endpoint.listeners.get(listener) or (ListenerPorts(endpoint.host, endpoint.port)
                                                   if not endpoint.listeners else None)

    def locate(self, partition: int, listener: str) -> Node | None:
        """The coordinator of a shard as clients on `listener` reach it; None while it moves
        or while this process may not answer (the lease ran out)."""
        a = self.assignment
        if a is None or not self.serving():
            return None
        owner = a.owners.get(partition)
        if owner is None:
            return None
        if owner == self.instance_id and not self.service.partition_available(partition):
            return None
        ports = self._listener(owner, listener)
        node_id = a.node_ids.get(owner)
        if ports is None or node_id is None:
            return None
        return Node(node_id, ports.host, ports.port)

    def front(self, broker: int, listener: str) -> tuple[str, int] | None:
        """The address fronting upstream broker `broker` on `listener`, the same on every
        instance; None: this instance's own port for it (no map yet, or the chosen instance
        has no port for that broker)."""
        fronts = self._fronts
        if not fronts:
            return None
        instance = fronts[broker % len(fronts)]
        ports = self._listener(instance, listener)
        if ports is None:
            return None
        port = ports.brokers.get(broker)
        return None if port is None else (ports.host, port)

    def coordinator_nodes(self, listener: str) -> list[tuple[int, str, int]]:
        """Every instance's synthetic node (id, host, port) on `listener`, for Metadata."""
        a = self.assignment
        if a is None:
            return []
        out = []
        for instance, node_id in sorted(a.node_ids.items(), key=lambda kv: kv[1]):
            ports = self._listener(instance, listener)
            if ports is not None:
                out.append((node_id, ports.host, ports.port))
        return out

    def status(self) -> dict[str, Any]:
        """What `kcoord cluster status` and /cluster show of this instance's view."""
        a = self.assignment
        endpoints: Mapping[str, Endpoint] = a.endpoints if a is not None else {}
        return {
            "instance_id": self.instance_id,
            "node_id": self.node_id(),
            "generation": a.generation if a is not None else -1,
            "serving": self.serving(),
            "shards": sorted(a.shards) if a is not None else [],
            "held": sorted(self.held),
            "owners": {str(s): i for s, i in sorted(a.owners.items())} if a is not None else {},
            "instances": {i: {"node_id": a.node_ids.get(i, -1) if a is not None else -1,
                              "host": e.host, "port": e.port} for i, e in sorted(endpoints.items())},
            "moves": self.moves,
        }

