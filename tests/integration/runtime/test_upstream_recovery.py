"""The upstream goes down under a running kcoord and comes back: kcoord stays up, says so,
answers group requests with retriable coordinator errors meanwhile, closes forwarded
traffic cleanly, and recovers with no restart.

The upstream is Tansu on its s3:// store, served by moto's S3 server (environment.md §3.5),
so a broker restart keeps topics, records and the state topic (a memory-store Tansu comes
back empty: that fresh-cluster case is in test_state_topic.py).
"""
from __future__ import annotations

import socket

import pytest

from support.admin import committed_offsets, create_topic
from support.metrics import kcoord_with_metrics, sample
from support.moto_s3 import start_moto_s3
from support.produce import produce_records
from support.raw_client import assert_closed, call, encode_request, request, request_types
from support.rdkafka import RdkafkaConsumer
from support.tansu import start_tansu
from support.wait import wait_until

FIND_COORDINATOR, OFFSET_COMMIT, METADATA = 10, 8, 3
NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE = 16, 15
PARTITIONS = 2


def _committed_total(bootstrap: str, group: str, topic: str, timeout: float = 10.0) -> int:
    """Records committed over the topic's partitions (a partition with no commit counts 0)."""
    return sum(max(0, o) for o in committed_offsets(bootstrap, group, topic, PARTITIONS, timeout).values())


def _offset_commit(group: str, topic: str, offset: int):
    m = request_types(OFFSET_COMMIT, 8)
    return m.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=(m.OffsetCommitRequestTopic(name=topic, partitions=(m.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata=""),)),))


@pytest.mark.timeout(240)
def test_upstream_stopped_and_restarted_on_its_store_under_a_running_kcoord(tmp_path, names, drivers):
    s3 = start_moto_s3(tmp_path)
    store = ("--storage-engine", s3.storage_url)
    broker = start_tansu(log_dir=tmp_path, extra_args=store, env=s3.tansu_env)
    kcoord = None
    try:
        kcoord = kcoord_with_metrics(broker.bootstrap, f"__kcoord_{names.topic()}", state_partitions=4).start()
        pid = kcoord.process.pid
        topic, group, probe_group = names.topic(), names.group(), names.group()
        create_topic(broker.bootstrap, topic, PARTITIONS)
        produce_records(broker.bootstrap, topic, 20)
        consumer = drivers.add(RdkafkaConsumer(kcoord.bootstrap, topic, group, group_protocol="consumer"))
        consumer.start()
        consumer.wait_for(lambda: len(consumer.consumed()) >= 20, 30, "20 records before the outage")
        wait_until(lambda: _committed_total(kcoord.bootstrap, group, topic) == 20,
                   20, message="the first 20 records committed")

        # --- the upstream goes down --------------------------------------------------------
        port = broker.port
        broker.stop()
        wait_until(lambda: " ERROR kcoord.gateway.cluster: upstream " in kcoord.log_text(), 15,
                   message=lambda: f"kcoord's ERROR on the outage; log:\n{kcoord.log_text()[-2000:]}")
        assert sample(kcoord.metrics(), "kcoord_upstream_up") == 0
        # FindCoordinator: no coordinator while the state topic cannot be reached.
        find = call(kcoord.bootstrap, FIND_COORDINATOR, 4,
                    request(FIND_COORDINATOR, 4, key_type=0, coordinator_keys=(probe_group,)))
        assert [c.error_code for c in find.coordinators] == [COORDINATOR_NOT_AVAILABLE]
        # A commit needs a write the upstream cannot take: a retriable coordinator error, at once.
        commit = call(kcoord.bootstrap, OFFSET_COMMIT, 8, _offset_commit(probe_group, topic, 5))
        assert [p.error_code for t in commit.topics for p in t.partitions] in \
            ([NOT_COORDINATOR], [COORDINATOR_NOT_AVAILABLE])
        # A forwarded request cannot reach the upstream: its connection closes, no answer, no hang.
        with socket.create_connection(("127.0.0.1", kcoord.port), timeout=10) as sock:
            sock.sendall(encode_request(METADATA, 12, 7, request(
                METADATA, 12, topics=None, allow_auto_topic_creation=False,
                include_topic_authorized_operations=False)))
            assert_closed(sock, timeout=10)
        assert kcoord.process.poll() is None, "kcoord must ride out the outage"

        # --- the upstream comes back on the same store -------------------------------------
        broker = start_tansu(port=port, log_dir=tmp_path, extra_args=store, env=s3.tansu_env)
        wait_until(lambda: "INFO kcoord.gateway.cluster: upstream" in kcoord.log_text()
                   and "answers again" in kcoord.log_text(), 15,
                   message=lambda: f"kcoord's INFO on recovery; log:\n{kcoord.log_text()[-2000:]}")
        wait_until(lambda: sample(kcoord.metrics(), "kcoord_upstream_up") == 1, 10, message="kcoord_upstream_up 1")
        # The committed offsets survived (they are in the state topic on the store).
        wait_until(lambda: _committed_total(kcoord.bootstrap, group, topic, timeout=5) == 20,
                   30, message="the 20 committed offsets after the upstream's return")
        # Consumption and commits resume in the same consumer, through the same kcoord.
        produce_records(broker.bootstrap, topic, 10)
        consumer.wait_for(lambda: len(consumer.consumed()) >= 30, 60, "10 more records after the outage")
        wait_until(lambda: _committed_total(kcoord.bootstrap, group, topic) == 30,
                   30, message="30 records committed after the outage")
        assert kcoord.process.poll() is None and kcoord.process.pid == pid, "no kcoord restart"
        metrics = kcoord.metrics()
        assert sample(metrics, "kcoord_upstream_outages_total") >= 1
        assert sample(metrics, "kcoord_state_topic_present") == 1
        assert "Traceback" not in kcoord.log_text()
    finally:
        if kcoord is not None and kcoord.process is not None:
            kcoord.stop()
        broker.stop()
        s3.stop()
