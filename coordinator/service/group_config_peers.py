"""Per-group config requests in a kcoord cluster: the groups whose shard another instance owns
are asked of that instance (cluster/peers.py), since Kafka's Admin sends DescribeConfigs,
AlterConfigs and IncrementalAlterConfigs of GROUP resources, and ListConfigResources, to any
broker (the least loaded node), not to the group's coordinator (docs/user/cluster.md,
"Requests for another instance's groups").

Rules of this module:
- Only the client's allowed resources travel: the receiving instance authorizes them as the
  client first (service/group_configs.py). They travel in an Envelope carrying the client's
  principal and address (KIP-590, protocol/envelope.py), and the owner authorizes them again
  as that client (service/envelope.py): the instances' own principal needs only Cluster
  CLUSTER_ACTION (docs/user/group-configs.md, "Several processes", names the ACLs).
- A request that came in an Envelope is served from this instance's shards only, never
  routed on (`peers_for`).
- Each owner is asked once per request, for all its groups, concurrently with the others
  and with this instance's own shards, at the client's request version, so the owner's
  answer entries are the client's; an answer that does not match what was asked (another
  count, other names) is an unavailable owner, never merged.
- A group whose shard is moving (no owner in the map), or whose owner cannot answer, answers
  COORDINATOR_NOT_AVAILABLE (retriable: the shard has an owner again within a rebalance),
  with a message naming the group and why. ListConfigResources answers that error as a
  whole rather than list some instances' groups only.
"""
from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from ..cluster.peers import Peers, PeerUnavailable
from ..group.errors import ApiError
from ..protocol.service import ClientInfo

LIST_GROUP_TYPES = (32,)       # ConfigResource.Type.GROUP


def peers_for(service: Any, forwarded: bool) -> Peers | None:
    """The cluster's other instances to route to: None in a single process, and for a
    request that came from another instance (``forwarded``, in an Envelope)."""
    return None if forwarded else service.group_config_peers


def place(service: Any, peers: Peers | None, names: Sequence[str]) -> tuple[list[str], dict[str, list[str]],
                                                                          dict[str, ApiError]]:
    """(the names served here, the others by owning instance, the moving ones' errors)."""
    if peers is None:
        return list(names), {}, {}
    here: list[str] = []
    remote: dict[str, list[str]] = {}
    moving: dict[str, ApiError] = {}
    for name in names:
        owner = peers.owner(service.partition_for(name))
        if owner == peers.instance_id:
            here.append(name)
        elif owner is None:
            moving[name] = ApiError(ErrorCode.coordinator_not_available,
                                    f"The shard of group {name} is moving between kcoord instances; retry")
        else:
            remote.setdefault(owner, []).append(name)
    return here, remote, moving


async def _ask_all(peers: Peers, info: ClientInfo, asks: dict[str, Any]) -> dict[str, Any]:
    """Each instance's answer to its request for the client ``info``, or the PeerUnavailable
    it failed with."""
    instances = list(asks)
    answers = await asyncio.gather(*(peers.ask(i, asks[i], info) for i in instances), return_exceptions=True)
    out: dict[str, Any] = {}
    for instance, answer in zip(instances, answers):
        if isinstance(answer, BaseException) and not isinstance(answer, Exception):
            raise answer        # a cancellation: not an answer
        out[instance] = answer
    return out


def _unavailable(name: str, instance: str, why: object) -> ApiError:
    return ApiError(ErrorCode.coordinator_not_available,
                    f"Group {name}'s kcoord instance {instance} could not answer ({why}); retry")


async def ask_resources(peers: Peers | None, info: ClientInfo, request: Any, resources: Sequence[Any],
                        remote: dict[str, list[str]], answers_field: str,
                        by_name: bool) -> tuple[dict[int, Any], dict[str, ApiError]]:
    """Ask each owner for its groups' resources of ``request`` (their order kept): the owners'
    entries by the index of the resource in ``resources`` (``by_name``: one answer per
    distinct name, matched by name; else one per resource, in order), and the errors of
    the names whose owner could not answer."""
    picked: dict[str, list[int]] = {}
    owner_of = {n: i for i, names in remote.items() for n in names}
    for index, r in enumerate(resources):
        instance = owner_of.get(r.resource_name)
        if instance is not None:
            picked.setdefault(instance, []).append(index)
    assert peers is not None or not picked
    asks = {i: dataclasses.replace(request, resources=tuple(resources[x] for x in xs)) for i, xs in picked.items()}
    entries: dict[int, Any] = {}
    errors: dict[str, ApiError] = {}
    for instance, answer in (await _ask_all(peers, info, asks) if peers is not None else {}).items():
        indices = picked[instance]
        got = answer if isinstance(answer, Exception) else _match(answer, answers_field, resources, indices, by_name)
        if isinstance(got, Exception):
            errors.update((resources[x].resource_name, _unavailable(resources[x].resource_name, instance, got))
                          for x in indices)
        else:
            entries.update(got)
    return entries, errors


def _match(answer: Any, field: str, resources: Sequence[Any], indices: list[int],
           by_name: bool) -> dict[int, Any] | Exception:
    got = list(getattr(answer, field, ()))
    if by_name:
        named = {e.resource_name: e for e in got}
        wanted = {resources[x].resource_name for x in indices}
        if set(named) != wanted or len(got) != len(wanted):
            return PeerUnavailable(f"it answered for {sorted(named)[:5]}, asked for {sorted(wanted)[:5]}")
        return {x: named[resources[x].resource_name] for x in indices}
    if len(got) != len(indices) or any(e.resource_name != resources[x].resource_name for e, x in zip(got, indices)):
        return PeerUnavailable(f"it answered {len(got)} resources for {len(indices)} asked")
    return dict(zip(indices, got))


async def listed_elsewhere(service: Any, peers: Peers, info: ClientInfo, request: Any) -> list[str]:
    """Every group with configs on the other instances' shards (ListConfigResources).
    Raises ApiError(COORDINATOR_NOT_AVAILABLE) when a shard is moving or an instance cannot
    answer: a list without some shards' groups would be a wrong answer."""
    moving = peers.moving(range(service.config.state_topic_partitions))
    if moving:
        raise ApiError(ErrorCode.coordinator_not_available,
                       f"State-topic partitions {moving[:8]} are moving between kcoord instances; retry")
    ask = dataclasses.replace(request, resource_types=LIST_GROUP_TYPES)
    names: list[str] = []
    for instance, answer in (await _ask_all(peers, info, {i: ask for i in peers.others()})).items():
        code = ErrorCode.unknown_server_error if isinstance(answer, Exception) else answer.error_code
        if code != ErrorCode.none:
            raise ApiError(ErrorCode.coordinator_not_available, f"kcoord instance {instance} could not list its "
                           f"groups ({answer if isinstance(answer, Exception) else code.name}); retry")
        names.extend(r.resource_name for r in answer.config_resources if int(r.resource_type) == 32)
    return names
