"""A record that fails to load takes down only its own shard (issue 10), on a real Tansu
with a real `kcoord serve`.

An OffsetCommit value with version 99 is written straight into the state topic (not
through the gateway). kcoord starts anyway, serves the groups of every other shard,
answers NOT_COORDINATOR for the groups of the bad record's shard, reports the shard in
its metrics and log, and `kcoord offsets show` prints the record. Restarted with
`state.load.skip.corrupt.offsets=P:O` it skips exactly that record and loads the shard.
"""
from __future__ import annotations

import asyncio
import io
import urllib.request
from contextlib import redirect_stdout

from kio.schema.errors import ErrorCode

from coordinator.cli import build_parser
from coordinator.group.hashing import KAFKA, partition_for
from coordinator.group.kio_util import schema
from coordinator.runtime.state_topic import StateTopic
from coordinator.service.partitioner import decide
from records import OffsetCommitKey, OffsetCommitValue, encode_key, encode_value
from support import ports, raw_client
from support.kcoord import FAST, KcoordProcess
from support.wait import wait_until

PARTITIONS = 8
OFFSET_FETCH, OFFSET_COMMIT = 9, 8


class KcoordWithMetrics(KcoordProcess):
    metrics_port: int = 0

    def serve_args(self) -> list[str]:
        if not self.metrics_port:
            self.metrics_port = ports.free_port()
        return super().serve_args() + ["--metrics-port", str(self.metrics_port)]

    def metric(self, name: str, **labels: str) -> float | None:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
            text = r.read().decode()
        wanted = [f'{k}="{v}"' for k, v in labels.items()]
        for line in text.splitlines():
            key, _, value = line.rpartition(" ")
            base, _, rest = key.partition("{")
            if base == name and all(w in rest for w in wanted):
                return float(value)
        return None


def group_in(partition: int, prefix: str) -> str:
    return next(g for g in (f"{prefix}-{i}" for i in range(100_000)) if partition_for(g, PARTITIONS) == partition)


def write_state_records(bootstrap: str, state_topic: str, records: list[tuple[int, bytes, bytes]]) -> list[int]:
    """Append (partition, key, value) straight to the state topic, as kcoord writes it (the
    partitioner marker first: Kafka's placement, which `group_in` computes); returns their offsets."""
    async def run() -> list[int]:
        topic = StateTopic(bootstrap, state_topic, PARTITIONS)
        await topic.start()
        try:
            assert await decide(bootstrap, state_topic, PARTITIONS) is KAFKA
            return [await topic.append(p, [(k, v)], 1_700_000_000_000) for p, k, v in records]
        finally:
            await topic.stop()
    return asyncio.run(run())


def commit_record(group: str, topic: str, partition: int, offset: int, version: int = 3) -> tuple[bytes, bytes]:
    key = encode_key(OffsetCommitKey(group=group, topic=topic, partition=partition))
    value = encode_value(OffsetCommitValue(offset=offset, metadata="", commit_timestamp=1_700_000_000_000), 3)
    return key, version.to_bytes(2, "big") + value[2:]


def fetch(bootstrap: str, group: str, version: int = 7):
    mod = schema("offset_fetch", version, "request")
    if version < 8:
        req = mod.OffsetFetchRequest(group_id=group, topics=None, require_stable=False)
    else:
        req = mod.OffsetFetchRequest(groups=(mod.OffsetFetchRequestGroup(
            group_id=group, topics=None, member_id=None, member_epoch=-1),), require_stable=False)
    return raw_client.call(bootstrap, OFFSET_FETCH, version, req)


def offsets_of(resp) -> dict:
    return {(t.name, p.partition_index): p.committed_offset for t in resp.topics for p in t.partitions}


def commit(bootstrap: str, group: str, topic: str, offset: int) -> set:
    mod = schema("offset_commit", 8, "request")
    req = mod.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=(mod.OffsetCommitRequestTopic(name=topic, partitions=(mod.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata=""),)),))
    resp = raw_client.call(bootstrap, OFFSET_COMMIT, 8, req)
    return {p.error_code for t in resp.topics for p in t.partitions}


def show(bootstrap: str, state_topic: str, partition: int, offset: int) -> tuple[int, str]:
    args = build_parser().parse_args(["offsets", "show", "--bootstrap", bootstrap, "--topic", state_topic,
                                      "--partition", str(partition), "--offset", str(offset)])
    out = io.StringIO()
    with redirect_stdout(out):
        rc = args.func(args)
    return rc, out.getvalue()


def test_a_bad_record_fails_only_its_shard_and_the_skip_config_loads_it(tansu, names):
    from support.admin import create_topic

    state_topic = f"__kcoord_{names.topic()}"
    data_topic = names.topic()
    create_topic(tansu.bootstrap, data_topic, 2)
    bad_p = 3
    bad_group, neighbour = group_in(bad_p, "bad"), group_in(bad_p, "neighbour")
    good_group = group_in(5, "good")
    offsets = write_state_records(tansu.bootstrap, state_topic, [
        (5, *commit_record(good_group, data_topic, 0, 41)),
        (bad_p, *commit_record(neighbour, data_topic, 0, 7)),
        (bad_p, *commit_record(bad_group, data_topic, 0, 9, version=99)),
        # Another key: a later record of the same key would supersede the bad one on load.
        (bad_p, *commit_record(bad_group, data_topic, 1, 11)),
    ])
    bad_offset = offsets[2]
    assert offsets[1:] == [0, 1, 2]

    kc = KcoordWithMetrics(upstream=tansu.bootstrap, state_topic=state_topic, state_partitions=PARTITIONS)
    kc.start()
    try:
        # The process is up and the other shards serve: the loaded commit, and a new one.
        assert kc.process.poll() is None
        resp = fetch(kc.bootstrap, good_group)
        assert resp.error_code == ErrorCode.none and offsets_of(resp) == {(data_topic, 0): 41}
        other = group_in(6, "other")
        assert commit(kc.bootstrap, other, data_topic, 5) == {ErrorCode.none}
        assert offsets_of(fetch(kc.bootstrap, other)) == {(data_topic, 0): 5}
        # The bad record's shard answers NOT_COORDINATOR, in each API's shape.
        for g in (bad_group, neighbour):
            assert fetch(kc.bootstrap, g).error_code == ErrorCode.not_coordinator
            assert [x.error_code for x in fetch(kc.bootstrap, g, 9).groups] == [ErrorCode.not_coordinator]
        assert commit(kc.bootstrap, bad_group, data_topic, 12) == {ErrorCode.not_coordinator}
        # Metrics and log name the shard, the topic and the offset.
        assert kc.metric("kcoord_shard_state", partition=str(bad_p), state="failed") == 1
        assert kc.metric("kcoord_shard_state", partition="5", state="active") == 1
        assert kc.metric("kcoord_shard_load_failures_total", partition=str(bad_p)) == 1
        log = kc.log_text()
        assert (f"topic {state_topic}, partition {bad_p}, offset {bad_offset}" in log
                and "unknown value version 99" in log), log[-3000:]
        # The operator can look at the record.
        rc, out = show(tansu.bootstrap, state_topic, bad_p, bad_offset)
        assert rc == 0 and f"partition {bad_p} offset {bad_offset}" in out
        assert "ERROR: unknown value version 99" in out and "value hex" in out
        assert f"state.load.skip.corrupt.offsets={bad_p}:{bad_offset}" in out
    finally:
        kc.stop()

    # Restart with the explicit skip: the shard loads, without the skipped record only.
    kc.config = FAST + (f"state.load.skip.corrupt.offsets={bad_p}:{bad_offset}",)
    kc.restart()
    try:
        wait_until(lambda: fetch(kc.bootstrap, bad_group).error_code == ErrorCode.none, 15,
                   message="bad group's shard serves after the skip")
        assert offsets_of(fetch(kc.bootstrap, bad_group)) == {(data_topic, 1): 11}
        assert offsets_of(fetch(kc.bootstrap, neighbour)) == {(data_topic, 0): 7}
        assert kc.metric("kcoord_shard_state", partition=str(bad_p), state="active") == 1
        assert kc.metric("kcoord_shard_load_skipped_records_total", partition=str(bad_p)) == 1
        log = kc.log_text()
        assert f"SKIPPED the record at topic {state_topic}, partition {bad_p}, offset {bad_offset}" in log
        assert "FAILED to load" not in log
    finally:
        kc.stop()
