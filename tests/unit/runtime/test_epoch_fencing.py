"""fencing=epoch without a broker: what each Produce answer means for the shard, and the
takeover state machine (InitProducerId, fence write at sequence 0, idempotent appends, the
KIP-360 refresh, the rotation write) against a scripted upstream."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from kio.schema.errors import ErrorCode

from coordinator.runtime.epoch_producers import (
    FENCE_RECORD_TYPE,
    EpochProducers,
    fence_record,
    is_fence_record,
    produce_outcome,
)
from coordinator.runtime.epoch_upkeep import durability_warnings
from coordinator.runtime.fenced_links import StateLogError
from coordinator.runtime.state_log import ShardFenced
from records.batch import iter_batches

E = ErrorCode


@pytest.mark.parametrize(("code", "base", "outcome"), [
    (E.none, 7, "ok"),
    (E.none, -1, "reload"),                          # Tansu: a duplicate without an offset
    (E.invalid_producer_epoch, -1, "fenced"),        # Kafka
    (E.producer_fenced, -1, "fenced"),               # Tansu
    (E.invalid_txn_state, -1, "fenced"),
    (E.out_of_order_sequence_number, -1, "reload"),
    (E.duplicate_sequence_number, -1, "reload"),
    (E.unknown_producer_id, -1, "reload"),
    (E.not_leader_or_follower, -1, "resend"),
    (E.record_list_too_large, -1, "error"),
])
def test_each_produce_answer_maps_to_one_outcome(code, base, outcome):
    assert produce_outcome(code, base) == outcome


def test_the_fence_record_is_a_private_type_keyed_by_partition():
    key, value = fence_record(3, 42, 7)
    assert int.from_bytes(key[:2], "big") == FENCE_RECORD_TYPE and is_fence_record(key)
    assert fence_record(3, 1, 1)[0] == key, "one key per partition: compaction keeps the latest"
    assert not is_fence_record(b"\x00\x01group") and not is_fence_record(None)


class ScriptedLinks:
    """The UpstreamLinks surface the producers use: answers queued per API."""

    def __init__(self) -> None:
        self.init_answers: list[tuple[ErrorCode, int, int]] = []
        self.produce_answers: list[tuple[ErrorCode, int]] = []
        self.inits: list[tuple[int, int]] = []       # (expected producer id, epoch) sent
        self.produced: list[tuple[int, int, int, int, bytes]] = []  # pid, epoch, seq, records, bytes

    async def coordinator(self, txn_id):
        return ("coordinator", 1)

    async def leader(self, partition):
        return ("leader", 1)

    def forget_leader(self, partition):
        pass

    def forget_coordinator(self, txn_id):
        pass

    async def call(self, address, request):
        if type(request).__name__ == "InitProducerIdRequest":
            self.inits.append((int(request.producer_id), int(request.producer_epoch)))
            code, pid, epoch = self.init_answers.pop(0)
            return SimpleNamespace(error_code=code, producer_id=pid, producer_epoch=epoch)
        assert request.transactional_id is None, "idempotent batches carry no transactional id"
        data = request.topic_data[0].partition_data[0].records
        (batch,) = iter_batches(data)
        assert not batch.is_transactional
        self.produced.append((batch.producer_id, batch.producer_epoch, batch.base_sequence,
                              len(batch.records), data))
        code, base = self.produce_answers.pop(0)
        return SimpleNamespace(responses=[SimpleNamespace(partition_responses=[
            SimpleNamespace(index=request.topic_data[0].partition_data[0].index, error_code=code, base_offset=base)])])


def _producers(links: ScriptedLinks, owns=None) -> EpochProducers:
    return EpochProducers(links, "state", "kcoord", transaction_timeout_ms=60_000, request_timeout_s=5.0,
                          take_timeout_s=5.0, owns=owns)


def test_a_takeover_bumps_the_epoch_then_writes_the_fence_at_sequence_zero_then_appends_in_sequence():
    async def scenario():
        links = ScriptedLinks()
        links.init_answers = [(E.concurrent_transactions, -1, -1), (E.none, 9, 4)]   # the upgrade's retry
        links.produce_answers = [(E.none, 10), (E.none, 11), (E.not_leader_or_follower, -1), (E.none, 13)]
        producers = _producers(links)
        assert await producers.take(0) == (9, 4)
        assert links.inits == [(-1, -1), (-1, -1)]
        assert links.produced[0][:4] == (9, 4, 0, 1), "the fence write: new epoch, sequence 0"
        assert await producers.append(0, [(b"a", b"1"), (b"b", b"2")], 1) == 11
        assert await producers.append(0, [(b"c", b"3")], 1) == 13
        assert [p[:4] for p in links.produced[1:]] == [(9, 4, 1, 2), (9, 4, 3, 1), (9, 4, 3, 1)]
        assert links.produced[2][4] == links.produced[3][4], "a not-leader answer resends the same batch"
    asyncio.run(scenario())


def test_a_fence_write_refused_leaves_the_shard_untaken():
    async def scenario():
        links = ScriptedLinks()
        links.init_answers = [(E.none, 9, 4)]
        links.produce_answers = [(E.invalid_producer_epoch, -1)]
        producers = _producers(links)
        with pytest.raises(ShardFenced):
            await producers.take(0)
        assert producers.producer(0) is None
    asyncio.run(scenario())


@pytest.mark.parametrize("code", [E.invalid_producer_epoch, E.producer_fenced, E.invalid_txn_state])
def test_a_fencing_answer_unloads_and_forgets_the_session(code):
    async def scenario():
        links = ScriptedLinks()
        links.init_answers = [(E.none, 9, 4)]
        links.produce_answers = [(E.none, 0), (code, -1)]
        producers = _producers(links)
        await producers.take(0)
        with pytest.raises(ShardFenced):
            await producers.append(0, [(b"a", b"1")], 1)
        assert producers.producer(0) is None
        with pytest.raises(ShardFenced):
            await producers.append(0, [(b"a", b"1")], 1)
    asyncio.run(scenario())


@pytest.mark.parametrize(("code", "base"), [(E.out_of_order_sequence_number, -1), (E.none, -1)])
def test_an_unknown_log_reloads_and_the_shard_writes_again_only_after_a_new_take(code, base):
    async def scenario():
        links = ScriptedLinks()
        links.init_answers = [(E.none, 9, 4), (E.none, 9, 5)]
        links.produce_answers = [(E.none, 0), (code, base), (E.none, 2), (E.none, 3)]
        producers = _producers(links)
        await producers.take(0)
        with pytest.raises(StateLogError):
            await producers.append(0, [(b"a", b"1")], 1)
        with pytest.raises(StateLogError, match="taken again"):
            await producers.append(0, [(b"a", b"1")], 1)
        assert await producers.take(0) == (9, 5)                  # the reload re-takes
        assert await producers.append(0, [(b"a", b"1")], 1) == 3
        assert [p[:3] for p in links.produced[2:]] == [(9, 5, 0), (9, 5, 1)]
    asyncio.run(scenario())


def test_the_refresh_reinits_with_the_kip_360_fields_and_its_append_is_the_new_epochs_fence():
    async def scenario():
        links = ScriptedLinks()
        links.init_answers = [(E.none, 9, 4), (E.none, 9, 5)]
        links.produce_answers = [(E.none, 0), (E.none, 1), (E.none, 2)]
        producers = _producers(links)
        await producers.take(0)
        await producers.append(0, [(b"a", b"1")], 1)
        assert producers.mark_refresh(0) and not producers.mark_refresh(1)
        await producers.append(0, [(b"b", b"2")], 1)
        assert links.inits[-1] == (9, 4), "expected producer id and epoch: PRODUCER_FENCED if taken meanwhile"
        assert links.produced[-1][:3] == (9, 5, 0)
    asyncio.run(scenario())


def test_a_refresh_refused_as_fenced_steals_nothing():
    async def scenario():
        links = ScriptedLinks()
        links.init_answers = [(E.none, 9, 4), (E.producer_fenced, -1, -1)]
        links.produce_answers = [(E.none, 0)]
        producers = _producers(links)
        await producers.take(0)
        producers.mark_refresh(0)
        with pytest.raises(ShardFenced):
            await producers.append(0, [(b"b", b"2")], 1)
        assert len(links.produced) == 1, "nothing written after the refused refresh"
    asyncio.run(scenario())


def test_a_new_producer_id_also_fences_the_old_one_at_its_next_epoch():
    async def scenario():
        links = ScriptedLinks()
        links.init_answers = [(E.none, 9, 32766), (E.none, 12, 0)]     # the epoch is exhausted
        links.produce_answers = [(E.none, 0), (E.none, 1), (E.none, 2)]
        producers = _producers(links)
        await producers.take(0)
        producers.mark_refresh(0)
        await producers.append(0, [(b"b", b"2")], 1)
        assert [p[:3] for p in links.produced[1:]] == [(9, 32767, 0), (12, 0, 0)]
    asyncio.run(scenario())


def test_a_shard_not_assigned_here_is_neither_taken_nor_written():
    async def scenario():
        owned = {0}
        links = ScriptedLinks()
        links.init_answers = [(E.none, 9, 4)]
        links.produce_answers = [(E.none, 0)]
        producers = _producers(links, owns=lambda p: p in owned)
        with pytest.raises(ShardFenced):
            await producers.take(1)
        await producers.take(0)
        owned.clear()
        with pytest.raises(ShardFenced):
            await producers.append(0, [(b"a", b"1")], 1)
        assert len(links.produced) == 1 and links.inits == [(-1, -1)]
    asyncio.run(scenario())


def test_durability_warnings_name_each_weak_setting_but_not_on_one_broker():
    weak = {"min.insync.replicas": "1", "unclean.leader.election.enable": "true"}
    assert durability_warnings("s", 1, 1, weak) == []
    warnings = durability_warnings("s", 3, 1, weak)
    assert len(warnings) == 3
    assert any("replication factor 1" in w for w in warnings)
    assert any("min.insync.replicas=1" in w for w in warnings)
    assert any("unclean.leader.election.enable=true" in w for w in warnings)
    assert durability_warnings("s", 3, 3, {"min.insync.replicas": "2",
                                           "unclean.leader.election.enable": "false"}) == []


def test_a_refresh_that_the_upstream_cannot_answer_with_kip_360_fields_falls_back_to_a_plain_init():
    """Tansu 0.6 answers InitProducerId with an expected producer id UNKNOWN_SERVER_ERROR."""
    async def scenario():
        links = ScriptedLinks()
        links.init_answers = [(E.none, 9, 4), (E.unknown_server_error, -1, -1), (E.none, 9, 5)]
        links.produce_answers = [(E.none, 0), (E.none, 1)]
        producers = _producers(links)
        await producers.take(0)
        producers.mark_refresh(0)
        await producers.append(0, [(b"b", b"2")], 1)
        assert links.inits == [(-1, -1), (9, 4), (-1, -1)]
        assert links.produced[-1][:3] == (9, 5, 0)
    asyncio.run(scenario())


def test_batches_waiting_behind_a_request_in_flight_go_together_each_with_its_own_answer():
    from coordinator.runtime.epoch_sender import CoalescingSender

    class SlowLinks:
        def __init__(self) -> None:
            self.requests: list[list[int]] = []
            self.release = asyncio.Event()

        async def call(self, address, request):
            parts = [int(p.index) for p in request.topic_data[0].partition_data]
            self.requests.append(parts)
            if len(self.requests) == 1:
                await self.release.wait()
            return SimpleNamespace(responses=[SimpleNamespace(partition_responses=[
                SimpleNamespace(index=p, error_code=E.none if p != 2 else E.invalid_producer_epoch, base_offset=p * 10)
                for p in parts])])

    async def scenario():
        links = SlowLinks()
        sender = CoalescingSender(links, "state", 5.0)
        first = asyncio.create_task(sender.send(("b", 1), 0, b"x"))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        later = [asyncio.create_task(sender.send(("b", 1), p, b"y")) for p in (1, 2)]
        await asyncio.sleep(0)
        links.release.set()
        answers = await asyncio.gather(first, *later)
        assert links.requests == [[0], [1, 2]]
        assert [(a.error_code, a.base_offset) for a in answers] == [
            (E.none, 0), (E.none, 10), (E.invalid_producer_epoch, 20)]
    asyncio.run(scenario())


def test_a_new_producer_id_at_takeover_fences_the_logs_last_writer_even_after_a_failed_try():
    async def scenario():
        links = ScriptedLinks()
        links.init_answers = [(E.none, 12, 0), (E.none, 12, 1)]
        links.produce_answers = [(E.record_list_too_large, -1), (E.none, 5), (E.none, 6)]
        producers = _producers(links)
        scans: list[int] = []

        async def last_writer(partition, exclude):
            scans.append(exclude)
            return (9, 7)

        producers.last_writer = last_writer          # the log's last idempotent writer: pid 9, epoch 7
        with pytest.raises(StateLogError):
            await producers.take(0)                  # the old id's fence write failed
        assert await producers.take(0) == (12, 1)    # epoch 1 now, but the old id is still unfenced
        assert scans == [12, 12]
        assert [p[:3] for p in links.produced] == [(9, 8, 0), (9, 8, 0), (12, 1, 0)]
    asyncio.run(scenario())
