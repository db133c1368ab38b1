"""The Streams rehearsal's output reader on a scripted consumer: a read ends once the consumer
is at the end it asked for (under read_committed the last stable offset, past transaction
markers it never gets), also when that end was reached by an earlier read; it runs to its
budget only when the end is not reached."""
from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import IsolationLevel, KafkaError

from migration.rehearse import streams_output
from migration.rehearse.streams_output import OutputReader


class Msg:
    def __init__(self, offset: int, key: bytes | None = None, value: bytes | None = None, eof: bool = False) -> None:
        self._offset, self._key, self._value = offset, key, value
        self._error = KafkaError(KafkaError._PARTITION_EOF) if eof else None

    def error(self) -> KafkaError | None:
        return self._error

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value


class FakeConsumer:
    """Hands out the scripted batches, one per consume(); then nothing."""

    batches: list[list[Msg]] = []

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.consumes = 0

    def assign(self, partitions: list) -> None:
        pass

    def consume(self, n: int, timeout: float) -> list[Msg]:
        self.consumes += 1
        return FakeConsumer.batches.pop(0) if FakeConsumer.batches else []

    def close(self) -> None:
        pass


class Done:
    def __init__(self, offset: int) -> None:
        self.offset = offset

    def result(self, timeout: float) -> Done:
        return self


class FakeAdmin:
    """ListOffsets LATEST: the LSO at READ_COMMITTED, the high watermark at READ_UNCOMMITTED."""

    lso, high = 0, 0

    def __init__(self, config: dict[str, Any]) -> None:
        self.levels: list[IsolationLevel] = []

    def list_offsets(self, request: dict, isolation_level: IsolationLevel, request_timeout: float) -> dict:
        self.levels.append(isolation_level)
        end = FakeAdmin.lso if isolation_level == IsolationLevel.READ_COMMITTED else FakeAdmin.high
        return {tp: Done(end) for tp in request}


@pytest.fixture(autouse=True)
def fakes(monkeypatch):
    monkeypatch.setattr(streams_output, "Consumer", FakeConsumer)
    monkeypatch.setattr(streams_output, "AdminClient", FakeAdmin)
    FakeConsumer.batches = []


def test_a_read_committed_read_ends_at_the_lso_with_a_transaction_open():
    # 0-1 committed (marker 2), 3 aborted (marker 4), 5 committed (marker 6), 7 of a transaction
    # still open: the LSO is 7, the high watermark 8.
    FakeAdmin.lso, FakeAdmin.high = 7, 8
    FakeConsumer.batches = [[Msg(0, b"w0", b"1"), Msg(1, b"w1", b"1")], [Msg(5, b"w0", b"2"), Msg(7, eof=True)]]
    reader = OutputReader("h:1", "out", read_committed=True)
    assert reader.consumer.config["isolation.level"] == "read_committed"
    assert reader.read(budget_s=60) == {"w0": 2, "w1": 1}
    assert reader.summary() == {"isolation": "read_committed", "records": 3, "end_offset": 7, "reached_end": True}
    assert reader.admin.levels == [IsolationLevel.READ_COMMITTED] and reader.consumer.consumes == 2
    # Nothing new since: the next read asks for the end again and returns without consuming.
    assert reader.read(budget_s=60) == {"w0": 2, "w1": 1} and reader.consumer.consumes == 2


def test_a_read_that_does_not_reach_its_end_says_so_after_its_budget():
    FakeAdmin.lso, FakeAdmin.high = 7, 8
    FakeConsumer.batches = [[Msg(0, b"w0", b"1")]]
    reader = OutputReader("h:1", "out", read_committed=False)
    assert reader.read(budget_s=0.01) == {"w0": 1}
    assert reader.summary() == {"isolation": "read_uncommitted", "records": 1, "end_offset": 8, "reached_end": False}
    assert reader.admin.levels == [IsolationLevel.READ_UNCOMMITTED]


def test_the_report_carries_the_last_read_and_warns_when_it_fell_short():
    from .test_streams_rehearsal import _report, clean

    obs = clean()
    obs.output_read = {"isolation": "read_committed", "records": 10, "end_offset": 14, "reached_end": True}
    report = _report(obs)
    assert report["output_read"] == obs.output_read and report["run"]["output_isolation"] == "read_committed"
    assert report["warnings"] == []
    obs.output_read = {"isolation": "read_committed", "records": 9, "end_offset": 14, "reached_end": False}
    assert _report(obs)["warnings"] == ["the last read of the output topic (read_committed) did not reach its end "
                                        "(offset 14) within its budget: the counts may be short"]
