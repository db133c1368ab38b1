"""The consumer's embedded protocol comes from clients (JoinGroup metadata, SyncGroup
assignments): a count that claims more than the bytes hold is refused by the bounded walk
before kio's native reader would allocate for it. Without the walk, kio asks for 16 GiB for
the subscription below and aborts the process once the allocation fails (shown in a child
with a 2 GB address-space limit)."""
from __future__ import annotations

import struct

import pytest

from coordinator.protocol.consumer_protocol import (
    MalformedProtocolData,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)

from .kio_alone import kio_alone_aborts

# ConsumerProtocolSubscription v1 claiming 2**31 - 1 topics, then one byte.
SUBSCRIPTION_BOMB = struct.pack(">h", 1) + struct.pack(">i", 0x7FFFFFFF) + b"x"
# ConsumerProtocolAssignment v0 claiming 2**31 - 1 topic partitions.
ASSIGNMENT_BOMB = struct.pack(">h", 0) + struct.pack(">i", 0x7FFFFFFF) + b"x"


def test_a_subscription_claiming_more_topics_than_it_holds_is_refused():
    with pytest.raises(MalformedProtocolData, match=r"ConsumerProtocolSubscription v1: .*2147483647"):
        decode_subscription(SUBSCRIPTION_BOMB)


def test_an_assignment_claiming_more_partitions_than_it_holds_is_refused():
    with pytest.raises(MalformedProtocolData, match=r"ConsumerProtocolAssignment v0: .*2147483647"):
        decode_assignment(ASSIGNMENT_BOMB)


def test_valid_data_still_decodes_and_a_newer_version_s_extra_bytes_are_ignored():
    data = encode_assignment({"t": [0, 1]}, version=3)
    assert decode_assignment(data).partitions == {"t": (0, 1)}
    newer = struct.pack(">h", 9) + data[2:] + b"future fields"
    assert decode_assignment(newer).partitions == {"t": (0, 1)}


def test_without_the_walk_kio_aborts_on_the_subscription():
    assert kio_alone_aborts("from kio.schema.consumer_protocol_subscription.v1 import data",
                            "data.ConsumerProtocolSubscription", SUBSCRIPTION_BOMB, 2)
