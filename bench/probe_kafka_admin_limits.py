"""What Apache Kafka itself answers to absurd admin requests, sent raw and directly (no kcoord):
CreateTopics with a replication factor above the broker count, 10,000 and 50,000,000
partitions, and CreatePartitions growing a 1-partition topic to 20,001 and 50,000,000.

Measured once for docs/design/differential.md (CreatePartitions is a deliberate difference). It
starts a one-node Kafka of the test harness (tests/support/kafka_broker.py) in a temporary
directory, with ports from KCOORD_TEST_PORTS, and prints each answer, the topic's partition
count afterwards and whether the node is still running.

    KCOORD_TEST_PORTS=30150-30199 .venv/bin/python bench/probe_kafka_admin_limits.py [--heap 1g]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from coordinator.protocol import apis  # noqa: E402
from support.kafka_broker import KAFKA_44, start_kafka  # noqa: E402
from support.raw_client import call, create_topics_request, partition_count, request_types  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heap", default="1g")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kafka-probe-") as work:
        cluster = start_kafka(KAFKA_44, Path(work), heap=args.heap)
        try:
            bootstrap = cluster.bootstrap
            for label, topics in [("replication factor 3 on one broker", [("rf3", 1, 3)]),
                                  ("CreateTopics of 10,000 partitions", [("p10k", 10_000, 1)]),
                                  ("CreateTopics of 50,000,000 partitions", [("p50m", 50_000_000, 1)]),
                                  ("a topic of 1 partition", [("grow", 1, 1)])]:
                response = call(bootstrap, apis.CREATE_TOPICS, 7, create_topics_request(topics, timeout_s=60))
                print(label, [(t.name, int(t.error_code), t.error_message) for t in response.topics])
            m = request_types(apis.CREATE_PARTITIONS, 3)
            for count in (20_001, 50_000_000):
                started = time.monotonic()
                try:
                    response = call(bootstrap, apis.CREATE_PARTITIONS, 3, m.CreatePartitionsRequest(
                        timeout=timedelta(seconds=60), validate_only=False,
                        topics=(m.CreatePartitionsTopic(name="grow", count=count, assignments=None),)))
                    answer = [(r.name, int(r.error_code), r.error_message) for r in response.results]
                except OSError as e:
                    answer = [f"no answer: {e!r}"]
                try:
                    after = f"{partition_count(bootstrap, 'grow')} partitions"
                except OSError as e:
                    after = f"no Metadata answer ({e!r})"
                print(f"CreatePartitions count={count}: {answer} after {time.monotonic() - started:.1f} s; "
                      f"then the topic: {after}; node running: {cluster.nodes[0].is_running()}")
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
