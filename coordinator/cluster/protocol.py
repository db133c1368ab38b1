"""What kcoord instances tell each other through their upstream group (protocol type
`kcoord`): each member's metadata in JoinGroup, and the leader's assignment in SyncGroup.

Format: an int16 version, then a JSON object (orjson). The group is kcoord's own, so the
format is ours; JSON keeps it readable in `kafka-consumer-groups --describe --verbose` and
lets later versions add fields that older members ignore. A member reads any version >= 1
with the fields it knows, like Kafka's embedded consumer protocol.

Rules: decoding never trusts its input (another process, an older kcoord, or anyone with
rights on the group may have written it): every field is type- and range-checked, sizes
are bounded, and a problem raises `MalformedMembershipData` naming the field.
"""
from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

import orjson

PROTOCOL_TYPE = "kcoord"
PROTOCOL_NAME = "kcoord-sticky"
VERSION = 1
_VERSION = struct.Struct(">h")
MAX_BYTES = 1 << 20          # 1 MiB: 10,000 shards with long host names fit many times over
MAX_SHARDS = 100_000         # Kafka caps a topic's partitions far lower in practice
_MAX_TEXT = 1024
MAX_LISTENERS = 16
MAX_BROKERS = 10_000


class MalformedMembershipData(ValueError):
    """Member metadata or an assignment kcoord cannot use; the message names the field."""


@dataclass(frozen=True, slots=True)
class ListenerPorts:
    """One client listener of an instance: its advertised host, bootstrap port, and the port
    fronting each upstream broker (node id -> port) on that listener."""
    host: str
    port: int
    brokers: Mapping[int, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int
    # Listener name -> its ports: a client asking on listener L is sent to the same listener
    # of another instance (its protocol and advertised host), as brokers do.
    listeners: Mapping[str, ListenerPorts] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    instance_id: str
    endpoint: Endpoint
    rack: str | None = None
    owned: frozenset[int] = frozenset()     # shards served now (stickiness)
    node_id: int = -1                       # the synthetic node id it had, -1: none yet
    generation: int = -1                    # the generation `owned` is from
    # > 0: a plain `kcoord serve` (one process, fencing none) that watches the group only to
    # see a second kcoord; the wall-clock ms its watch started. 0: a cluster member.
    solo_since_ms: int = 0
    # A plain serve that has not served yet (its watch checks the group first): it yields to
    # every other kcoord. Absent (older kcoords): False, they watched only once serving.
    solo_candidate: bool = False
    # Within a session of this process's first JoinGroup: another process with the same
    # instance id (the one it replaced, KIP-345) may still hold a lease, so shards nobody
    # claims in this generation are handed out with a hold (balancer.py).
    fresh: bool = False


@dataclass(frozen=True, slots=True)
class Assignment:
    """The leader's answer to one member: its shards, and the whole map every member gets."""
    generation: int
    shards: frozenset[int]                                  # this member's
    owners: Mapping[int, str] = field(default_factory=dict)    # shard -> instance id (absent: moving)
    endpoints: Mapping[str, Endpoint] = field(default_factory=dict)   # instance id -> endpoint
    node_ids: Mapping[str, int] = field(default_factory=dict)        # instance id -> synthetic node id
    error: int = 0     # 0, or a reason the leader refused this member (balancer.py: 1 duplicate instance id,
    #                    2 a plain `kcoord serve` that is not alone; `endpoints` then names the others)
    # Shards of `shards` whose previous owner may still answer (a static replacement): served
    # only a membership session after this assignment arrived (docs/user/cluster.md, safety argument).
    hold: frozenset[int] = frozenset()


def _frame(body: dict) -> bytes:
    return _VERSION.pack(VERSION) + orjson.dumps(body)


def _unframe(data: bytes, what: str) -> dict:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise MalformedMembershipData(f"{what}: not bytes")
    if len(data) < 2:
        raise MalformedMembershipData(f"{what}: {len(data)} bytes, too short for a version")
    if len(data) > MAX_BYTES:
        raise MalformedMembershipData(f"{what}: {len(data)} bytes, over the {MAX_BYTES}-byte limit")
    (version,) = _VERSION.unpack_from(data, 0)
    if version < 1:
        raise MalformedMembershipData(f"{what}: version {version}, expected 1 or above")
    try:
        body = orjson.loads(bytes(data[2:]))
    except orjson.JSONDecodeError as e:
        raise MalformedMembershipData(f"{what} v{version}: not JSON ({e})") from None
    if not isinstance(body, dict):
        raise MalformedMembershipData(f"{what} v{version}: a JSON {type(body).__name__}, expected an object")
    return body


def _text(body: dict, key: str, what: str, optional: bool = False) -> str | None:
    value = body.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value or len(value) > _MAX_TEXT:
        raise MalformedMembershipData(f"{what}: field {key!r} must be a non-empty string of at most "
                                      f"{_MAX_TEXT} characters, got {_show(value)}")
    return value


def _int(value, key: str, what: str, lo: int, hi: int) -> int:
    if type(value) is not int or not lo <= value <= hi:
        raise MalformedMembershipData(f"{what}: field {key!r} must be an integer in [{lo}, {hi}], got {_show(value)}")
    return value


def _bool(body: dict, key: str, what: str) -> bool:
    value = body.get(key, False)
    if type(value) is not bool:
        raise MalformedMembershipData(f"{what}: field {key!r} must be true or false, got {_show(value)}")
    return value


def _shards(value, key: str, what: str) -> frozenset[int]:
    if not isinstance(value, list) or len(value) > MAX_SHARDS:
        raise MalformedMembershipData(f"{what}: field {key!r} must be a list of at most {MAX_SHARDS} shards")
    return frozenset(_int(v, key, what, 0, MAX_SHARDS - 1) for v in value)


def _endpoint(value, key: str, what: str) -> Endpoint:
    if not isinstance(value, dict):
        raise MalformedMembershipData(f"{what}: field {key!r} must be an object with host and port")
    where = f"{what} {key}"
    return Endpoint(_text(value, "host", where) or "", _int(value.get("port"), "port", where, 1, 65535),
                    _listeners(value.get("listeners", {}), where))


def _listeners(value, what: str) -> dict[str, ListenerPorts]:
    """`{"NAME": {"host": h, "port": p, "brokers": {"<node id>": port}}}`, bounded."""
    if not isinstance(value, dict) or len(value) > MAX_LISTENERS:
        raise MalformedMembershipData(f"{what}: field 'listeners' must be an object of at most {MAX_LISTENERS} "
                                      f"listeners")
    out: dict[str, ListenerPorts] = {}
    for name, entry in value.items():
        where = f"{what} listeners[{_show(name)}]"
        _text({"name": name}, "name", where)
        if not isinstance(entry, dict):
            raise MalformedMembershipData(f"{where}: must be an object with host, port and brokers")
        brokers_raw = entry.get("brokers", {})
        if not isinstance(brokers_raw, dict) or len(brokers_raw) > MAX_BROKERS:
            raise MalformedMembershipData(f"{where}: field 'brokers' must be an object of at most {MAX_BROKERS} "
                                          f"entries")
        brokers: dict[int, int] = {}
        for node, port in brokers_raw.items():
            if not isinstance(node, str) or not node.lstrip("-").isdigit() or len(node) > 11:
                raise MalformedMembershipData(f"{where}: brokers key {_show(node)} is not a node id")
            brokers[_int(int(node), "brokers", where, 0, 2**31 - 1)] = _int(port, f"brokers[{node}]", where, 1, 65535)
        out[name] = ListenerPorts(_text(entry, "host", where) or "", _int(entry.get("port"), "port", where, 1, 65535),
                                  brokers)
    return out


def _listeners_json(e: Endpoint) -> dict:
    return {name: {"host": lp.host, "port": lp.port, "brokers": {str(n): p for n, p in sorted(lp.brokers.items())}}
            for name, lp in sorted(e.listeners.items())}


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# ------------------------------------------------------------------ metadata
def encode_metadata(m: MemberMetadata) -> bytes:
    return _frame({"instance_id": m.instance_id, "host": m.endpoint.host, "port": m.endpoint.port,
                   "listeners": _listeners_json(m.endpoint), "rack": m.rack, "owned": sorted(m.owned),
                   "node_id": m.node_id, "generation": m.generation, "solo_since_ms": m.solo_since_ms,
                   "solo_candidate": m.solo_candidate, "fresh": m.fresh})


def decode_metadata(data: bytes) -> MemberMetadata:
    what = "kcoord member metadata"
    body = _unframe(data, what)
    return MemberMetadata(
        instance_id=_text(body, "instance_id", what) or "",
        endpoint=Endpoint(_text(body, "host", what) or "", _int(body.get("port"), "port", what, 1, 65535),
                          _listeners(body.get("listeners", {}), what)),
        rack=_text(body, "rack", what, optional=True),
        owned=_shards(body.get("owned", []), "owned", what),
        node_id=_int(body.get("node_id", -1), "node_id", what, -1, 2**31 - 1),
        generation=_int(body.get("generation", -1), "generation", what, -1, 2**31 - 1),
        solo_since_ms=_int(body.get("solo_since_ms", 0), "solo_since_ms", what, 0, 2**53),
        solo_candidate=_bool(body, "solo_candidate", what), fresh=_bool(body, "fresh", what))


# ---------------------------------------------------------------- assignment
def encode_assignment(a: Assignment) -> bytes:
    return _frame({"generation": a.generation, "shards": sorted(a.shards),
                   "owners": {str(s): i for s, i in sorted(a.owners.items())},
                   "endpoints": {i: {"host": e.host, "port": e.port, "listeners": _listeners_json(e)}
                                 for i, e in sorted(a.endpoints.items())},
                   "node_ids": dict(sorted(a.node_ids.items())), "error": a.error, "hold": sorted(a.hold)})


def decode_assignment(data: bytes) -> Assignment:
    what = "kcoord assignment"
    body = _unframe(data, what)
    owners_raw = body.get("owners", {})
    endpoints_raw = body.get("endpoints", {})
    node_ids_raw = body.get("node_ids", {})
    for key, value in (("owners", owners_raw), ("endpoints", endpoints_raw), ("node_ids", node_ids_raw)):
        if not isinstance(value, dict) or len(value) > MAX_SHARDS:
            raise MalformedMembershipData(f"{what}: field {key!r} must be an object of at most {MAX_SHARDS} entries")
    owners: dict[int, str] = {}
    for shard, instance in owners_raw.items():
        if not shard.isdigit():
            raise MalformedMembershipData(f"{what}: owners key {_show(shard)} is not a shard number")
        owners[_int(int(shard), "owners", what, 0, MAX_SHARDS - 1)] = \
            _text({"owner": instance}, "owner", f"{what} owners[{shard}]") or ""
    endpoints = {(_text({"id": i}, "id", f"{what} endpoints") or ""): _endpoint(e, f"endpoints[{i}]", what)
                 for i, e in endpoints_raw.items()}
    node_ids = {(_text({"id": i}, "id", f"{what} node_ids") or ""): _int(n, f"node_ids[{i}]", what, 0, 2**31 - 1)
                for i, n in node_ids_raw.items()}
    unknown = {i for i in owners.values() if i not in endpoints}
    if unknown:
        raise MalformedMembershipData(f"{what}: owners name instances without an endpoint: {sorted(unknown)[:5]}")
    shards = _shards(body.get("shards", []), "shards", what)
    hold = _shards(body.get("hold", []), "hold", what)
    if not hold <= shards:
        raise MalformedMembershipData(f"{what}: field 'hold' names shards not assigned: {sorted(hold - shards)[:5]}")
    return Assignment(generation=_int(body.get("generation"), "generation", what, -1, 2**31 - 1),
                      shards=shards, owners=owners, endpoints=endpoints, node_ids=node_ids,
                      error=_int(body.get("error", 0), "error", what, 0, 32767), hold=hold)
