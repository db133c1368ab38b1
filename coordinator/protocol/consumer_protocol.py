"""The consumer's embedded protocol (Kafka's `ConsumerProtocol`): the subscription a
classic consumer sends in JoinGroup metadata and the assignment its leader sends in
SyncGroup. Both are an int16 version followed by the struct at that version.

Like Kafka, a newer version than we know is read with the highest known schema (its
extra fields are trailing bytes), so newer clients do not break conversion.

Both come from clients (JoinGroup metadata, SyncGroup assignments), so the bytes are walked
by checked.py before kio's native reader sees them: kio allocates what a count claims, and a
subscription claiming 2**31 - 1 topics asked for 16 GiB.
"""
from __future__ import annotations

import io
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.consumer_protocol_assignment.v0 import data as a0
from kio.schema.consumer_protocol_assignment.v1 import data as a1
from kio.schema.consumer_protocol_assignment.v2 import data as a2
from kio.schema.consumer_protocol_assignment.v3 import data as a3
from kio.schema.consumer_protocol_subscription.v0 import data as s0
from kio.schema.consumer_protocol_subscription.v1 import data as s1
from kio.schema.consumer_protocol_subscription.v2 import data as s2
from kio.schema.consumer_protocol_subscription.v3 import data as s3
from kio.serial import entity_reader, entity_writer

from .checked import check_body

_SUBSCRIPTIONS = (s0, s1, s2, s3)
_ASSIGNMENTS = (a0, a1, a2, a3)
_VERSION = struct.Struct(">h")


class MalformedProtocolData(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    user_data: bytes | None
    owned_partitions: Mapping[str, tuple[int, ...]]
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class ConsumerAssignment:
    version: int
    partitions: Mapping[str, tuple[int, ...]]
    user_data: bytes | None


def _split(data: bytes, what: str) -> tuple[int, int]:
    if data is None or len(data) < 2:
        raise MalformedProtocolData(f"{what}: {len(data or b'')} bytes, too short for a version")
    (version,) = _VERSION.unpack_from(data, 0)
    if version < 0:
        raise MalformedProtocolData(f"{what}: negative version {version}")
    return version, min(version, 3)


def decode_subscription(data: bytes) -> Subscription:
    version, known = _split(data, "ConsumerProtocolSubscription")
    mod = _SUBSCRIPTIONS[known]
    try:
        check_body(mod.ConsumerProtocolSubscription, data, 2)
        sub, _ = entity_reader(mod.ConsumerProtocolSubscription)(data, 2)
    except Exception as e:
        raise MalformedProtocolData(f"ConsumerProtocolSubscription v{version}: {e}") from e
    owned = {tp.topic: tuple(tp.partitions) for tp in getattr(sub, "owned_partitions", ())}
    return Subscription(version=version, topics=tuple(sub.topics), user_data=sub.user_data,
                        owned_partitions=owned, generation_id=getattr(sub, "generation_id", -1),
                        rack_id=getattr(sub, "rack_id", None))


def decode_assignment(data: bytes) -> ConsumerAssignment:
    if not data:
        # An empty assignment (e.g. a member the leader left out) means no partitions.
        return ConsumerAssignment(version=0, partitions={}, user_data=None)
    version, known = _split(data, "ConsumerProtocolAssignment")
    mod = _ASSIGNMENTS[known]
    try:
        check_body(mod.ConsumerProtocolAssignment, data, 2)
        a, _ = entity_reader(mod.ConsumerProtocolAssignment)(data, 2)
    except Exception as e:
        raise MalformedProtocolData(f"ConsumerProtocolAssignment v{version}: {e}") from e
    return ConsumerAssignment(version=version, user_data=a.user_data,
                              partitions={tp.topic: tuple(tp.partitions) for tp in a.assigned_partitions})


def encode_assignment(partitions: Mapping[str, Iterable[int]], version: int = 0,
                      user_data: bytes | None = None) -> bytes:
    version = max(0, min(version, 3))
    mod = _ASSIGNMENTS[version]
    value = mod.ConsumerProtocolAssignment(
        assigned_partitions=tuple(mod.TopicPartition(topic=t, partitions=tuple(sorted(ps)))
                                  for t, ps in sorted(partitions.items())),
        user_data=user_data)
    buf = io.BytesIO()
    buf.write(_VERSION.pack(version))
    entity_writer(mod.ConsumerProtocolAssignment)(buf, value)
    return buf.getvalue()


def encode_subscription(topics: Iterable[str], version: int = 3, *, owned: Mapping[str, Iterable[int]] = {},
                        user_data: bytes | None = None, generation_id: int = -1,
                        rack_id: str | None = None) -> bytes:
    """For tests and tools: what a classic consumer sends."""
    mod = _SUBSCRIPTIONS[max(0, min(version, 3))]
    kwargs: dict[str, Any] = dict(topics=tuple(topics), user_data=user_data)
    if version >= 1:
        kwargs["owned_partitions"] = tuple(mod.TopicPartition(topic=t, partitions=tuple(ps)) for t, ps in owned.items())
    if version >= 2:
        kwargs["generation_id"] = generation_id
    if version >= 3:
        kwargs["rack_id"] = rack_id
    buf = io.BytesIO()
    buf.write(_VERSION.pack(version))
    entity_writer(mod.ConsumerProtocolSubscription)(buf, mod.ConsumerProtocolSubscription(**kwargs))
    return buf.getvalue()
