"""Keyed arrays through kcoord in front of Kafka 4.4: an AlterReplicaLogDirs whose 20,000
distinct paths share one Java hashCode would hold a Kafka network thread for minutes (8,000
held one 36.5 s, and the cost grows with the cube: gateway/keyed_arrays.py,
bench/bench_keyed_arrays.py kafka). kcoord closes the connection instead of forwarding it,
and the broker keeps answering, through kcoord and directly on each of its network threads."""
from __future__ import annotations

import socket

import pytest

from support.raw_client import assert_closed, call_with, encode_request, request, request_types

ALTER_REPLICA_LOG_DIRS, METADATA, API_VERSIONS = 34, 3, 18


def _one_hash_code(n: int) -> list[str]:
    """n distinct strings of one Java hashCode ("Aa" and "BB" hash alike)."""
    k = (n - 1).bit_length()
    return ["".join("BB" if i >> b & 1 else "Aa" for b in range(k)) for i in range(n)]


def _alter_log_dirs(paths: list[str]):  # type: ignore[no-untyped-def]
    m = request_types(ALTER_REPLICA_LOG_DIRS, 2)
    return request(ALTER_REPLICA_LOG_DIRS, 2, dirs=tuple(m.AlterReplicaLogDir(path=p, topics=()) for p in paths))


@pytest.mark.parametrize("upstream", ["kafka44"], indirect=True)
def test_keys_of_one_hash_code_are_refused_and_kafka_keeps_answering(upstream, kcoord) -> None:
    host, _, port = kcoord.bootstrap.rpartition(":")
    hostile = socket.create_connection((host, int(port)), timeout=15)
    try:
        hostile.sendall(encode_request(ALTER_REPLICA_LOG_DIRS, 2, 1, _alter_log_dirs(_one_hash_code(20_000))))
        # Forwarded, Kafka would answer only after its parse (minutes): closed at once instead.
        assert_closed(hostile, timeout=60)
    finally:
        hostile.close()
    assert "Java hash codes meet in Kafka's table" in kcoord.log_text()
    # distinct paths of distinct hash codes are forwarded and answered (no such dirs: no results)
    answer = call_with(kcoord.bootstrap, ALTER_REPLICA_LOG_DIRS, 2, dirs=_alter_log_dirs(["/a", "/b"]).dirs)
    assert answer.results == ()
    metadata = call_with(kcoord.bootstrap, METADATA, 12, topics=None, allow_auto_topic_creation=False,
                         include_topic_authorized_operations=False)
    assert len(metadata.brokers) == 1
    for _ in range(2):                     # one connection per network thread of the broker
        assert call_with(upstream.bootstrap, API_VERSIONS, 0).error_code == 0
