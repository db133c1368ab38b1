"""Throughput of the `__consumer_offsets` codec (records/ package).

    python bench/bench_records.py [--n N]

Prints records/s for decode and encode of offset commits (key + value) and of
a ConsumerGroupCurrentMemberAssignment record with 50 partitions. Decode is
measured twice for offset commits: with every key distinct (key-cache misses,
the worst case) and with keys repeating over 1,000 partitions (a realistic
offsets log, where the same group/topic/partition is committed again and again).
Figures are one core, CPython, best of 5 runs in process CPU time.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from records import (  # noqa: E402
    ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue,
    OffsetCommitKey, OffsetCommitValue, TopicPartitions, decode_record, encode_key, encode_value,
)
from records import codec  # noqa: E402


def rate(label: str, n: int, fn) -> float:
    # Best of 5, in process CPU time: other work on a shared machine then
    # inflates the figures less than wall-clock time would.
    best = float("inf")
    for _ in range(5):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    per_s = n / best
    print(f"{label:<58} {per_s:>12,.0f} records/s  ({1e6 * best / n:.2f} µs/record)")
    return per_s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    n = ap.parse_args().n
    topic_id = uuid.uuid4()

    commits = [(OffsetCommitKey("payments-consumer", "payments", i),
                OffsetCommitValue(offset=1_000_000 + i, leader_epoch=7, metadata="",
                                  commit_timestamp=1_760_000_000_000 + i, topic_id=topic_id))
               for i in range(n)]
    encoded = [(encode_key(k), encode_value(v)) for k, v in commits]
    repeating = [(encode_key(OffsetCommitKey("payments-consumer", "payments", i % 1000)), v)
                 for i, (_, v) in enumerate(encoded)]

    def decode_distinct() -> None:
        codec._KEY_CACHE.clear()
        for k, v in encoded:
            decode_record(k, v)

    def decode_repeating() -> None:
        for k, v in repeating:
            decode_record(k, v)

    def encode_commits() -> None:
        for k, v in commits:
            encode_key(k)
            encode_value(v)

    rate("decode offset commit v4 (distinct keys, cache misses)", n, decode_distinct)
    rate("decode offset commit v4 (keys repeat over 1000 partitions)", n, decode_repeating)
    rate("encode offset commit v4 (key + value)", n, encode_commits)

    m = n // 10
    tids = [uuid.uuid4() for _ in range(5)]
    value = ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=12, previous_member_epoch=11, state=0,
        assigned_partitions=tuple(TopicPartitions(t, tuple(range(10)), tuple([9] * 10))
                                  for t in tids))
    assignments = [(ConsumerGroupCurrentMemberAssignmentKey("payments-consumer", f"member-{i}"),
                    value) for i in range(m)]
    enc_assignments = [(encode_key(k), encode_value(v)) for k, v in assignments]

    def decode_assignments() -> None:
        codec._KEY_CACHE.clear()
        for k, v in enc_assignments:
            decode_record(k, v)

    def encode_assignments() -> None:
        for k, v in assignments:
            encode_key(k)
            encode_value(v)

    rate("decode member assignment (5 topics x 10 partitions + epochs)", m, decode_assignments)
    rate("encode member assignment (5 topics x 10 partitions + epochs)", m, encode_assignments)

    one_topic = ConsumerGroupCurrentMemberAssignmentValue(
        12, 11, 0, (TopicPartitions(topic_id, tuple(range(50)), tuple(range(50))),))
    enc_one = [(k, encode_value(one_topic)) for k, _ in enc_assignments]

    def decode_one_topic() -> None:
        codec._KEY_CACHE.clear()
        for k, v in enc_one:
            decode_record(k, v)

    rate("decode member assignment (1 topic x 50 partitions + epochs)", m, decode_one_topic)


if __name__ == "__main__":
    main()
