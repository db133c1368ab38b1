"""ListOffsets LATEST through the gateway answers the high watermark on every upstream
(coordinator/gateway/tansu_list_offsets.py): the docs' five-batch measurement
(docs/design/streams-groups.md, "Tansu's ListOffsets LATEST: the evidence") repeated through
kcoord. Tansu 0.6 lists 11 for five batches of 3, 2, 4, 1 and 5 records; kcoord answers 15.
In front of Kafka the answer is Kafka's, byte for byte, and no Fetch is added."""
from __future__ import annotations

import socket
import struct
from datetime import timedelta
from typing import Any

from confluent_kafka import Producer

from coordinator.metrics import GATEWAY_LATEST_CORRECTIONS
from coordinator.protocol import apis
from gateway_helpers import RunningGateway
from support.admin import create_topic
from support.names import TestNames
from support.raw_client import call, decode_response, encode_request, read_frame, request, request_types
from support.tansu import TansuBroker

BATCHES = (3, 2, 4, 1, 5)
LATEST, EARLIEST = -1, -2
# (version, isolation level) as measured in the docs; v1 has no isolation level.
ASKED = ((1, 0), (2, 1), (7, 0), (7, 1), (9, 1))


def _list_offsets(version: int, isolation_level: int, topic: str, timestamp: int) -> Any:
    types = request_types(apis.LIST_OFFSETS, version)
    partition = types.ListOffsetsPartition(partition_index=0, timestamp=timestamp,
                                           **({"current_leader_epoch": -1} if version >= 4 else {}))
    fields: dict[str, Any] = {"replica_id": -1, "topics": (types.ListOffsetsTopic(name=topic, partitions=(partition,)),)}
    if version >= 2:
        fields["isolation_level"] = isolation_level
    return request(apis.LIST_OFFSETS, version, **fields)


def _frames(address: tuple[str, int], calls: list[tuple[int, int, Any]]) -> list[bytes]:
    """The answers to ``calls`` (api key, version, body), sent in one write, read in order."""
    with socket.create_connection(address, timeout=30) as sock:
        sock.sendall(b"".join(encode_request(key, version, i, body) for i, (key, version, body) in enumerate(calls)))
        frames = []
        for i in range(len(calls)):
            frame = read_frame(sock)
            assert frame is not None, f"connection closed after {i} of {len(calls)} answers"
            assert struct.unpack_from(">i", frame, 4)[0] == i, "answers out of request order"
            frames.append(frame)
        return frames


def _offset(version: int, frame: bytes) -> int:
    _, response = decode_response(apis.LIST_OFFSETS, version, frame)
    partition = response.topics[0].partitions[0]
    assert partition.error_code == 0, partition
    return int(partition.offset)


def _high_watermark(bootstrap: str, topic: str) -> int:
    types = request_types(apis.FETCH, 12)
    response = call(bootstrap, apis.FETCH, 12, request(
        apis.FETCH, 12, replica_id=-1, max_wait=timedelta(milliseconds=100), min_bytes=0, max_bytes=1 << 20,
        isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=(), rack_id="",
        topics=(types.FetchTopic(topic=topic, partitions=(types.FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
            partition_max_bytes=1 << 20),)),)))
    return int(response.responses[0].partitions[0].high_watermark)


def _corrections() -> dict[str, float]:
    return {outcome: GATEWAY_LATEST_CORRECTIONS.labels(outcome=outcome)._value.get()
            for outcome in ("raised", "same", "kept")}


def test_latest_is_the_high_watermark_through_the_gateway(gateway: RunningGateway, gw_tansu: TansuBroker,
                                                          names: TestNames) -> None:
    topic = names.topic()
    create_topic(gateway.bootstrap, topic, 1, timeout=30)
    producer = Producer({"bootstrap.servers": gateway.bootstrap, "linger.ms": 200})
    for size in BATCHES:       # one batch each: one flush per batch
        for i in range(size):
            producer.produce(topic, value=b"v%d" % i, partition=0)
        assert producer.flush(30) == 0
    assert _high_watermark(gateway.bootstrap, topic) == sum(BATCHES) == 15
    host, _, port = gw_tansu.bootstrap.rpartition(":")
    upstream = (host, int(port))
    through = ("127.0.0.1", gateway.port)
    calls = [(apis.LIST_OFFSETS, v, _list_offsets(v, iso, topic, LATEST)) for v, iso in ASKED]
    calls.append((apis.LIST_OFFSETS, 7, _list_offsets(7, 0, topic, EARLIEST)))
    calls.insert(2, (apis.API_VERSIONS, 3, request(apis.API_VERSIONS, 3, client_software_name="t",
                                                   client_software_version="1")))
    before = _corrections()
    direct, answered = _frames(upstream, calls), _frames(through, calls)
    after = _corrections()
    lists = [(i, v) for i, (key, v, _) in enumerate(calls) if key == apis.LIST_OFFSETS]
    latest, earliest = lists[:-1], lists[-1]
    assert [_offset(v, answered[i]) for i, v in latest] == [15] * len(ASKED)
    assert answered[earliest[0]] == direct[earliest[0]] and _offset(7, answered[earliest[0]]) == 0
    listed_short = sum(_offset(v, direct[i]) < 15 for i, v in latest)
    if isinstance(gw_tansu, TansuBroker):
        # Tansu lists the last batch's base offset + 1 (11): every LATEST raised.
        assert listed_short == len(ASKED)
        assert after["raised"] - before["raised"] == len(ASKED) and after["kept"] == before["kept"]
    else:
        # Kafka: its own answer, byte for byte, and no Fetch added.
        assert listed_short == 0
        assert [answered[i] for i, _ in latest] == [direct[i] for i, _ in latest]
        assert after == before
