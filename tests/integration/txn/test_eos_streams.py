"""Kafka Streams 4.4 with processing.guarantee=exactly_once_v2 through a running `kcoord serve`
(issue 16, point 5), on Apache Kafka 4.4: EosStreamsApp.java upper-cases an input topic into an
output topic; every commit is one producer transaction carrying the outputs and the input
offsets (sendOffsetsToTransaction with the consumer's group metadata, KIP-447).

What this proves:
- the application's group (its application.id) ends with committed offsets equal to the
  input's end offsets, read with require_stable (no transaction left open);
- a read_committed consumer of the output sees each input's output exactly once;
- the same across a kill -9 of kcoord while records are flowing: transactions in flight
  abort or commit by their markers, Streams retries what aborted, and the restarted kcoord
  rebuilds the offsets from the log.
Kafka 4.4 only: on Tansu 0.6 a read_committed consumer also reads aborted records (see
test_eos_java_loop.py), so the exactly-once check could not hold there.
"""
from __future__ import annotations

import pytest
from eos_clients import JavaStreamsApp, read_committed_values, stable

from support.admin import create_topic
from support.produce import produce_records
from support.wait import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.java]
PARTITIONS, BATCH = 2, 30


def _ends(upstream, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": upstream.bootstrap, "group.id": "eos-streams-ends"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)}
    finally:
        c.close()


def _committed_all(kcoord, upstream, app_id: str, src: str) -> dict[int, int]:
    ends = _ends(upstream, src)
    return wait_until(lambda: stable(kcoord.bootstrap, app_id, src, PARTITIONS) == ends and ends, 90, 0.5,
                      message=lambda: f"{app_id}'s committed offsets reach the input's end offsets {ends} "
                                      f"(now {stable(kcoord.bootstrap, app_id, src, PARTITIONS)})")


@pytest.mark.parametrize("kill", [False, True], ids=["steady", "kill-9-kcoord"])
@pytest.mark.parametrize("upstream", ["kafka44"], indirect=True)
def test_streams_exactly_once_v2(kcoord, upstream, names, java_classes, tmp_path, kill):
    src, dst, app_id = names.topic(), names.topic(), f"eos-app-{names.group()}"
    create_topic(upstream.bootstrap, src, PARTITIONS)
    create_topic(upstream.bootstrap, dst, 1)
    inputs = [r.value for r in produce_records(upstream.bootstrap, src, BATCH)]
    app = JavaStreamsApp(kcoord.bootstrap, app_id=app_id, input=src, output=dst, state_dir=str(tmp_path))
    try:
        app.wait_state("RUNNING", 90)
        _committed_all(kcoord, upstream, app_id, src)
        if kill:
            # Records arrive while kcoord dies: transactions are in flight through it.
            inputs += [r.value for r in produce_records(upstream.bootstrap, src, BATCH)]
            assert kcoord.kill() == -9
            inputs += [r.value for r in produce_records(upstream.bootstrap, src, BATCH)]
            kcoord.restart()
            inputs += [r.value for r in produce_records(upstream.bootstrap, src, BATCH)]
            _committed_all(kcoord, upstream, app_id, src)
        outputs = read_committed_values(kcoord.bootstrap, dst, names.group(), len(inputs))
        assert sorted(outputs) == sorted(v.upper() for v in inputs), \
            f"each input exactly once downstream: {len(outputs)} outputs for {len(inputs)} inputs"
        assert not [line for line in app.seen if line.startswith("fatal")], app.seen
    finally:
        app.shutdown()
