"""`kcoord offsets load`/`replay --bootstrap` read a live topic (ops/live.py TopicReader).
Right after the state topic is created Kafka answers NOT_LEADER_OR_FOLLOWER (6) and the like
for a moment: the reader must retry those with a bounded backoff and a deadline, and still
fail at once on an error that does not pass by itself."""
from __future__ import annotations

import pytest

from ops.live import RETRIABLE_FETCH_ERRORS, Retry, TopicReader
from ops.logsource import OffsetsLogError, Problems
from records import (
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    encode_key,
    encode_value,
)
from records.batch import build_batch


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_retry_backs_off_doubling_up_to_a_cap_and_gives_up_at_the_deadline():
    clock = FakeClock()
    retry = Retry(3.0, first_backoff=0.1, max_backoff=0.5, clock=clock, sleep=clock.sleep)
    with pytest.raises(TimeoutError, match="still failing after 3s"):
        for _ in range(100):
            retry.wait("fetch")
    assert clock.sleeps[:4] == [0.1, 0.2, 0.4, 0.5]
    assert max(clock.sleeps) == 0.5 and clock.now == pytest.approx(3.0)
    retry.reset()                       # progress: a new deadline, the first backoff again
    assert retry.wait("fetch") == 0.1 == clock.sleeps[-1]     # the pause is returned too


def test_the_errors_seen_right_after_topic_creation_are_retriable():
    assert {3, 5, 6} <= RETRIABLE_FETCH_ERRORS
    assert 1 not in RETRIABLE_FETCH_ERRORS          # OFFSET_OUT_OF_RANGE is handled apart
    assert 29 not in RETRIABLE_FETCH_ERRORS         # TOPIC_AUTHORIZATION_FAILED stays fatal


def _one_batch() -> bytes:
    rec = CoordinatorRecord(GroupMetadataKey("g"), GroupMetadataValue(
        protocol_type="consumer", generation=1, protocol=None, leader=None,
        current_state_timestamp=-1, members=()))
    return build_batch([(encode_key(rec.key), encode_value(rec.value, 3))], timestamp_ms=1)


def _answers(*errors: int):
    """Fetch answers (partition, error, hwm, lso, log start, aborted, records): `errors` first,
    then the one batch, as the partition response tuples aiokafka decodes."""
    data = _one_batch()
    queue = [(0, e, -1, -1, -1, None, b"") for e in errors] + [(0, 0, 1, 1, 0, None, data)]
    calls: list[int] = []

    def fetch(offset: int):
        calls.append(offset)
        return queue.pop(0)
    return fetch, calls


def test_not_leader_right_after_creation_is_retried_until_the_data_comes():
    reader = TopicReader("unused:9092", "__kcoord_offsets", retry_seconds=5)
    fetch, calls = _answers(6, 5, 3)
    batches = list(reader._read_partition(fetch, 0, Problems(), None))
    assert [lb.batch.base_offset for lb in batches] == [0]
    assert calls == [0, 0, 0, 0] and reader.high_watermarks == {0: 1}


def test_a_retriable_error_that_does_not_pass_fails_after_the_deadline():
    reader = TopicReader("unused:9092", "__kcoord_offsets", retry_seconds=0.3)
    fetch, _ = _answers(*([6] * 1000))
    with pytest.raises(OffsetsLogError, match=r"error code 6\): still failing after 0.3s"):
        list(reader._read_partition(fetch, 0, Problems(), None))


def test_a_non_retriable_error_is_fatal_at_once():
    reader = TopicReader("unused:9092", "__kcoord_offsets", retry_seconds=30)
    fetch, calls = _answers(29)
    with pytest.raises(OffsetsLogError, match="failed with error code 29"):
        list(reader._read_partition(fetch, 0, Problems(), None))
    assert calls == [0]
