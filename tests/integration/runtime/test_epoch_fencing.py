"""Fencing by writing (`fencing=epoch`) on Kafka 4.4: a takeover bumps the shard's epoch and
fences with an acknowledged write before the load, the partition's producer state shows it
(DescribeProducers), a zombie process's writes after the fence are refused while everything
it landed before is loaded, and a rolling upgrade from `fencing=transactional` works
(and what rolling back does not fence)."""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest

from coordinator.runtime.epoch_producers import is_fence_record
from coordinator.runtime.fenced_state_log import FencedStateLog, StateLogError
from coordinator.runtime.state_log import ShardFenced
from coordinator.runtime.state_topic import StateTopic
from support.raw_client import call_with, request_types

PARTITIONS = 2
DESCRIBE_PRODUCERS = 61


async def _topic(bootstrap: str, names) -> str:
    """A new state topic, once the upstream's metadata lists it (bounded)."""
    name = f"__kcoord_{names.topic()}"
    await StateTopic(bootstrap, name, PARTITIONS).ensure_topic()
    log = _log(bootstrap, name)
    deadline = asyncio.get_running_loop().time() + 30
    try:
        while True:
            try:
                await log.start()
                return name
            except StateLogError:
                if asyncio.get_running_loop().time() > deadline:
                    raise
                await asyncio.sleep(0.05)
    finally:
        await log.stop()


def _log(bootstrap: str, topic: str, fencing: str = "epoch", **kwargs) -> FencedStateLog:
    return FencedStateLog(bootstrap, topic, PARTITIONS, take_timeout_s=30.0, fencing=fencing, **kwargs)


async def _load(log: FencedStateLog, partition: int) -> tuple[list[bytes], int]:
    """The keys the runtime would replay (fence records skipped, as runtime/loader.py does)."""
    seen: list[bytes] = []
    ends: dict[int, int] = {}
    await log.load([partition], lambda p, o, k, v: seen.append(k), lambda p, leo: ends.update({p: leo}))
    return [k for k in seen if not is_fence_record(k)], ends[partition]


def producers(bootstrap: str, topic: str, partition: int) -> dict[int, tuple[int, int]]:
    """DescribeProducers (API 61): the partition's producers, id -> (epoch, last timestamp)."""
    m = request_types(DESCRIBE_PRODUCERS, 0)
    response = call_with(bootstrap, DESCRIBE_PRODUCERS, 0, topics=(m.TopicRequest(
        name=topic, partition_indexes=(partition,)),))
    part = response.topics[0].partitions[0]
    assert part.error_code == 0, part
    return {int(p.producer_id): (int(p.producer_epoch), int(p.last_timestamp)) for p in part.active_producers}


def test_a_takeover_writes_its_fence_before_loading_and_the_partition_holds_the_new_epoch(kafka44, names):
    bootstrap = kafka44.bootstrap

    async def scenario():
        topic = await _topic(bootstrap, names)
        a, b = _log(bootstrap, topic), _log(bootstrap, topic)
        try:
            before = int(time.time() * 1000)
            keys, end = await _load(a, 0)
            assert keys == [] and end == 1, "the load ends after the fence record"
            pid, epoch = a.producer(0)
            state = producers(bootstrap, topic, 0)
            assert state[pid][0] == epoch and state[pid][1] >= before - 1000, state
            assert await a.append(0, [(b"k1", b"a1"), (b"k2", b"a2")], before) == 1
            assert await a.append(0, [(b"k3", b"a3")], before) == 3, "no marker: the next batch follows at once"

            keys, end = await _load(b, 0)                 # B takes over: A is fenced by B's write
            assert keys == [b"k1", b"k2", b"k3"] and end == 5
            pid_b, epoch_b = b.producer(0)
            assert pid_b == pid and epoch_b == epoch + 1
            assert producers(bootstrap, topic, 0)[pid][0] == epoch_b

            with pytest.raises(ShardFenced, match="(?i)invalid_producer_epoch|producer_fenced"):
                await a.append(0, [(b"zombie", b"z")], before)
            assert await b.append(0, [(b"k4", b"b4")], before) == 5
            keys, _ = await _load(_log(bootstrap, topic), 0)
            assert keys == [b"k1", b"k2", b"k3", b"k4"]
        finally:
            await a.stop()
            await b.stop()

    asyncio.run(scenario())


def test_a_takeover_that_gets_a_new_producer_id_fences_the_old_one_at_its_next_epoch(kafka44, names):
    """A new producer id (here a new transactional id, as after its expiry) fences nothing by
    itself: the takeover reads the last writer's id from the log and writes under its next
    epoch too, so the old owner is refused."""
    bootstrap = kafka44.bootstrap

    async def scenario():
        topic = await _topic(bootstrap, names)
        old, new = _log(bootstrap, topic, transactional_id_prefix="before"), \
            _log(bootstrap, topic, transactional_id_prefix="after")
        try:
            await _load(old, 0)
            old_pid, old_epoch = old.producer(0)
            await old.append(0, [(b"k1", b"1")], 1)
            keys, _ = await _load(new, 0)
            new_pid, new_epoch = new.producer(0)
            assert keys == [b"k1"] and new_pid != old_pid and new_epoch == 0
            state = producers(bootstrap, topic, 0)
            assert state[old_pid][0] == old_epoch + 1 and state[new_pid][0] == 0, state
            with pytest.raises(ShardFenced):
                await old.append(0, [(b"zombie", b"z")], 2)
        finally:
            await old.stop()
            await new.stop()

    asyncio.run(scenario())


ZOMBIE = r"""
import asyncio, sys
from coordinator.runtime.fenced_state_log import FencedStateLog, StateLogError
from coordinator.runtime.state_log import ShardFenced

async def main(bootstrap, topic):
    log = FencedStateLog(bootstrap, topic, 2, take_timeout_s=30.0, fencing="epoch")
    await log.load([1], lambda *a: None, lambda *a: None)
    print("TAKEN", flush=True)
    n = 0
    while True:
        key = b"z%d" % n
        try:
            await log.append(1, [(key, b"v")], 0)
        except ShardFenced as e:
            print("FENCED", e, flush=True)
            return
        print("ACKED", key.decode(), flush=True)
        n += 1
        await asyncio.sleep(0.01)

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def test_a_paused_zombie_writes_nothing_after_the_fence_and_its_acknowledged_writes_are_loaded(upstream, names):
    """SIGSTOP the owner while it writes, take over, SIGCONT: every write it saw acknowledged
    is in the new owner's load, and nothing it sends afterwards is accepted (Kafka answers
    INVALID_PRODUCER_EPOCH, Tansu PRODUCER_FENCED)."""
    bootstrap = upstream.bootstrap
    topic = asyncio.run(_topic(bootstrap, names))
    lines: list[str] = []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    zombie = subprocess.Popen([sys.executable, "-c", ZOMBIE, bootstrap, topic], stdout=subprocess.PIPE,
                              text=True, env=env)
    try:
        assert zombie.stdout is not None
        for line in zombie.stdout:
            lines.append(line.strip())
            if sum(x.startswith("ACKED") for x in lines) >= 20:
                break
        zombie.send_signal(signal.SIGSTOP)

        async def take_over():
            owner = _log(bootstrap, topic)
            keys, _ = await _load(owner, 1)
            return owner, keys

        owner, loaded = asyncio.run(take_over())
        zombie.send_signal(signal.SIGCONT)
        rest, _ = zombie.communicate(timeout=60)
        lines += rest.splitlines()
        acked = [x.split()[1].encode() for x in lines if x.startswith("ACKED")]
        assert any(x.startswith("FENCED") for x in lines), lines[-5:]
        assert set(acked) <= set(loaded), "every acknowledged write is in the new owner's load"

        async def after():
            keys, _ = await _load(_log(bootstrap, topic, take_on_load=False), 1)
            return keys

        final = asyncio.run(after())
        assert final == loaded, "nothing the zombie sent after the fence was accepted"
    finally:
        if zombie.poll() is None:
            zombie.send_signal(signal.SIGCONT)
            zombie.kill()
            zombie.wait()


def test_a_rolling_upgrade_from_transactional_fencing_takes_over_without_a_stop(kafka44, names):
    """An epoch owner takes a shard whose transactional owner is mid-transaction: the take
    aborts it (CONCURRENT_TRANSACTIONS retried meanwhile), the old owner is fenced; and back."""
    bootstrap = kafka44.bootstrap

    async def scenario():
        topic = await _topic(bootstrap, names)
        old, new = _log(bootstrap, topic, "transactional"), _log(bootstrap, topic)
        produced, resume = asyncio.Event(), asyncio.Event()

        async def pause(partition: int) -> None:
            produced.set()
            await resume.wait()

        try:
            await _load(old, 0)
            await old.append(0, [(b"committed", b"1")], 1)
            old.before_end_txn = pause
            write = asyncio.create_task(old.append(0, [(b"open", b"2")], 2))
            await asyncio.wait_for(produced.wait(), 30)

            keys, _ = await _load(new, 0)
            assert keys == [b"committed"], "the open transaction was aborted by the take"
            resume.set()
            with pytest.raises(ShardFenced):
                await asyncio.wait_for(write, 30)
            await new.append(0, [(b"epoch", b"3")], 3)

            back = _log(bootstrap, topic, "transactional")
            try:
                # And back: a transactional take writes nothing to the partition, so the epoch
                # owner is fenced there only by the transactional owner's first write
                # (docs/design/fencing.md: roll back with a stop of the epoch processes).
                keys, _ = await _load(back, 0)
                assert keys == [b"committed", b"epoch"]
                await back.append(0, [(b"back", b"4")], 4)
                with pytest.raises(ShardFenced):
                    await new.append(0, [(b"zombie", b"z")], 5)
            finally:
                await back.stop()
        finally:
            resume.set()
            await old.stop()
            await new.stop()

    asyncio.run(scenario())


def test_coordinator_services_fence_by_writing_and_keep_their_epoch_alive(kafka44, names):
    """The runtime over fencing=epoch: B's load fences A (A's next commit NOT_COORDINATOR, its
    shard unloaded); B's keep-alive and refresh write through its shard's writer without a
    reload, the refresh bumps the epoch at the partition (KIP-360); a fresh owner loads
    exactly what B acknowledged."""
    from kio.schema.errors import ErrorCode

    from coordinator.runtime.shard_runtime import ShardState
    from unit.runtime.fakes import group_in
    from unit.runtime.test_shard_failures import commit, commit_errors, committed, fetch, service_for

    bootstrap = kafka44.bootstrap

    async def scenario():
        topic = await _topic(bootstrap, names)
        # Expirations lowered on kcoord's side: keep-alive every ~0.5 s, refresh every ~1 s.
        logs = [_log(bootstrap, topic, producer_id_expiration_ms=2000, transactional_id_expiration_ms=4000)
                for _ in range(3)]
        services = []
        try:
            group = group_in(0, PARTITIONS)
            a = service_for(logs[0])
            await a.start()
            services.append(a)
            assert commit_errors(await commit(a, group, "t", 0, 5)) == {ErrorCode.none}

            b = service_for(logs[1])
            await b.start()
            services.append(b)
            assert committed(await fetch(b, group)) == {("t", 0): 5}
            generation = b.runtimes[0].generation
            pid, epoch = logs[1].producer(0)

            fenced: list[int] = []
            a.runtimes[0].on_fenced = lambda p, e: fenced.append(p)
            assert commit_errors(await commit(a, group, "t", 0, 99)) == {ErrorCode.not_coordinator}
            assert a.runtimes[0].state is ShardState.UNLOADED and fenced == [0]

            upkeep = logs[1].fence_upkeep.shards[0]
            deadline = asyncio.get_running_loop().time() + 30
            while upkeep.writes < 3 or logs[1].producer(0)[1] == epoch:
                assert asyncio.get_running_loop().time() < deadline, (upkeep.writes, logs[1].producer(0))
                await asyncio.sleep(0.05)
            new_pid, new_epoch = logs[1].producer(0)
            assert new_pid == pid and new_epoch > epoch
            assert producers(bootstrap, topic, 0)[pid][0] == new_epoch
            assert b.runtimes[0].state is ShardState.ACTIVE and b.runtimes[0].generation == generation, \
                "the upkeep's writes landed where the writer predicted: no reload"
            assert commit_errors(await commit(b, group, "t", 0, 7)) == {ErrorCode.none}

            c = service_for(logs[2])
            await c.start()
            services.append(c)
            assert committed(await fetch(c, group)) == {("t", 0): 7}
            assert not c.runtimes[0].shard.unknown_record_types, "fence records never reach the shard"
        finally:
            for s in services:
                s.close()
            for log in logs:
                await log.stop()

    asyncio.run(scenario())


def test_a_zombie_with_a_txn_offset_commit_in_flight_answers_it_not_coordinator(kafka44, names):
    """A client's TxnOffsetCommit is appended as the client's producer, which the shard's epoch
    does not fence; the barrier after it does: A appends the client's batch, pauses before its
    barrier, B takes over (its load holds the pending offset), A wakes and answers
    NOT_COORDINATOR (its barrier refused at the partition), and the client's commit lands in
    B's state at the COMMIT marker."""
    from kio.schema.errors import ErrorCode
    from kio.schema.txn_offset_commit.v3 import request as txn_v3

    from coordinator.runtime.shard_runtime import ShardState
    from integration.txn.test_txn_offsets_kafka import Client
    from unit.runtime.fakes import group_in
    from unit.runtime.test_shard_failures import CLIENT, committed, fetch, service_for

    bootstrap = kafka44.bootstrap

    async def scenario():
        topic = await _topic(bootstrap, names)
        logs = [_log(bootstrap, topic) for _ in range(2)]
        services = []
        paused, resume = asyncio.Event(), asyncio.Event()
        barrier = logs[0].barrier

        async def paused_barrier(partition: int) -> None:
            paused.set()
            await resume.wait()
            await barrier(partition)

        try:
            group = group_in(0, PARTITIONS)
            a = service_for(logs[0])
            await a.start()
            services.append(a)
            client = Client(logs[0], f"app-{names.group()}")
            await client.init()
            assert await client.add_offsets(topic, 0) == ErrorCode.none     # transactions v1: AddOffsetsToTxn
            logs[0].barrier = paused_barrier
            request = txn_v3.TxnOffsetCommitRequest(
                transactional_id=client.txn_id, group_id=group, producer_id=client.pid,
                producer_epoch=client.epoch, generation_id=-1, member_id="", group_instance_id=None,
                topics=(txn_v3.TxnOffsetCommitRequestTopic(name="t", partitions=(
                    txn_v3.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=5,
                                                           committed_leader_epoch=-1, committed_metadata=""),)),))
            in_flight = asyncio.create_task(a.handle(28, 3, request, CLIENT))
            await asyncio.wait({in_flight, asyncio.ensure_future(paused.wait())}, timeout=30,
                               return_when=asyncio.FIRST_COMPLETED)
            assert paused.is_set(), in_flight.result() if in_flight.done() else "neither"  # the batch is in the log

            b = service_for(logs[1])
            await b.start()
            services.append(b)
            resume.set()
            response = await asyncio.wait_for(in_flight, 30)
            # Retriable either way (the client finds the coordinator again). NOT_COORDINATOR
            # would be Kafka's word; txn_writes.barrier turns the writer's NOT_COORDINATOR into
            # COORDINATOR_NOT_AVAILABLE today.
            assert {p.error_code for t in response.topics for p in t.partitions} <= {
                ErrorCode.not_coordinator, ErrorCode.coordinator_not_available}
            assert a.runtimes[0].state is ShardState.UNLOADED

            await client.end(committed=True, version=4)
            deadline = asyncio.get_running_loop().time() + 30
            while committed(await fetch(b, group)) != {("t", 0): 5}:
                assert asyncio.get_running_loop().time() < deadline, "the COMMIT marker applies at B"
                await asyncio.sleep(0.1)
        finally:
            resume.set()
            for s in services:
                s.close()
            for log in logs:
                await log.stop()

    asyncio.run(scenario())


@pytest.fixture(scope="module")
def kafka44_expiring(tmp_path_factory: pytest.TempPathFactory):
    """Kafka 4.4 that forgets an idle producer after 3 s (checked every 0.5 s)."""
    import shutil

    from support.kafka_broker import KAFKA_44, start_kafka

    if shutil.which("java") is None:
        pytest.skip("java not on PATH: a JDK >= 17 runs the Apache Kafka broker")
    cluster = start_kafka(KAFKA_44, tmp_path_factory.mktemp("kafka44-expiring"), overrides={
        "producer.id.expiration.ms": "3000", "producer.id.expiration.check.interval.ms": "500"})
    yield cluster
    cluster.stop()


def test_the_keep_alive_keeps_a_loaded_shards_producer_known_where_an_idle_one_expires(kafka44_expiring, names):
    """The expiry is read from the broker (no kcoord setting); a loaded shard writes its
    keep-alive within it, so the partition still knows its epoch after several expiries,
    while a producer that only fenced (no upkeep) is forgotten."""
    from unit.runtime.test_shard_failures import service_for

    bootstrap = kafka44_expiring.bootstrap

    async def scenario():
        topic = await _topic(bootstrap, names)
        log, idle = _log(bootstrap, topic), _log(bootstrap, topic)
        service = service_for(log)
        try:
            await log.start()
            assert log.fence_upkeep.producer_id_expiration_ms == 3000
            await service.start()                      # loads (takes) both shards, arms the upkeep
            pid, epoch = log.producer(0)
            await idle.take(1)                         # only fences partition 1: no keep-alive
            idle_pid = idle.producer(1)[0]
            # Forgotten on partition 1 after the expiry (the check shows the broker expires)...
            deadline = asyncio.get_running_loop().time() + 30
            while idle_pid in producers(bootstrap, topic, 1):
                assert asyncio.get_running_loop().time() < deadline, "the idle producer never expired"
                await asyncio.sleep(0.2)
            # ...while partition 0's owner is still known after more than two expiries.
            upkeep = log.fence_upkeep.shards[0]
            while upkeep.writes < 8:
                assert asyncio.get_running_loop().time() < deadline + 30, upkeep.writes
                await asyncio.sleep(0.2)
            assert producers(bootstrap, topic, 0)[pid][0] == epoch
        finally:
            service.close()
            await log.stop()
            await idle.stop()

    asyncio.run(scenario())
