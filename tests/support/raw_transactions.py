"""A transactions-v2 producer's coordinator side spoken in raw requests, for the differential
tests (the same calls to Kafka 4.4's coordinators and to kcoord in front of it): InitProducerId,
TxnOffsetCommit at any version, EndTxn. Calls that meet a coordinator still being created or
moved, or the previous transaction's markers, are retried within a bound."""
from __future__ import annotations

from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from .differential import FIND_COORDINATOR, Coordinator, plain
from .wait import wait_until

INIT_PRODUCER_ID, END_TXN, TXN_OFFSET_COMMIT = 22, 26, 28
# Answers a transactional call retries: the transaction coordinator is still being created or
# moved, or the previous transaction's markers are still being written.
RETRIABLE = {ErrorCode.coordinator_not_available, ErrorCode.not_coordinator,
             ErrorCode.coordinator_load_in_progress, ErrorCode.concurrent_transactions}


class RawProducer:
    """The transaction-coordinator side of a transactions-v2 producer, spoken raw."""

    def __init__(self, side: Coordinator, transactional_id: str) -> None:
        self.side, self.transactional_id = side, transactional_id
        self.producer_id, self.epoch = -1, -1

    def _retry(self, api_key: int, version: int, what: str, **fields: Any) -> Any:
        last: list[Any] = []

        def attempt() -> Any:
            response = self.side.call(api_key, version, **fields)
            last[:] = [response]
            if response.error_code in RETRIABLE:
                return None
            assert response.error_code == ErrorCode.none, f"{self.side.name} {what}: {response}"
            return response
        return wait_until(attempt, 60, 0.2, lambda: f"{self.side.name} {what}: {last}")

    def init(self) -> None:
        # The first FindCoordinator(transaction) makes Kafka create __transaction_state.
        wait_until(lambda: self.side.call(FIND_COORDINATOR, 4, key_type=1, coordinator_keys=(
            self.transactional_id,)).coordinators[0].error_code == ErrorCode.none, 60, 0.2,
            lambda: f"{self.side.name}: the transaction coordinator")
        r = self._retry(INIT_PRODUCER_ID, 5, "InitProducerId", transactional_id=self.transactional_id,
                        transaction_timeout=timedelta(seconds=60), producer_id=-1, producer_epoch=-1)
        self.producer_id, self.epoch = r.producer_id, r.producer_epoch

    def end(self, committed: bool) -> str:
        r = self._retry(END_TXN, 5, "EndTxn", transactional_id=self.transactional_id,
                        producer_id=self.producer_id, producer_epoch=self.epoch, committed=committed)
        return plain(r.error_code)


def txn_commit(p: RawProducer, version: int, group: str, offsets: dict, *, epoch: int = -1, member: str = "",
               aliases: dict[Any, str]) -> dict[str, dict[int, str]]:
    """TxnOffsetCommit at ``version`` ({topic id (v6) or name: {partition: offset}}); the
    answers by topic alias, then partition (Kafka answers refused topics first)."""
    t = p.side.types(TXN_OFFSET_COMMIT, version)
    by_id = version >= 6
    topics = tuple(t.TxnOffsetCommitRequestTopic(**({"topic_id": key} if by_id else {"name": key}), partitions=tuple(
        t.TxnOffsetCommitRequestPartition(partition_index=i, committed_offset=o, committed_leader_epoch=-1,
                                          committed_metadata="txn") for i, o in parts.items()))
        for key, parts in offsets.items())
    generation = {"generation_id_or_member_epoch": epoch} if by_id else {"generation_id": epoch}
    response = p.side.call(TXN_OFFSET_COMMIT, version, transactional_id=p.transactional_id, group_id=group,
                           producer_id=p.producer_id, producer_epoch=p.epoch, member_id=member,
                           group_instance_id=None, topics=topics, **generation)
    return {aliases[x.topic_id if by_id else x.name]: {q.partition_index: plain(q.error_code) for q in x.partitions}
            for x in response.topics}
