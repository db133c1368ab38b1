"""Transactions v2 (KIP-890 part 2) end to end through kcoord, on Apache Kafka 4.4 (issue 16 §1).

Kafka 4.4 finalizes `transaction.version=2`. kcoord forwards that level only while it serves
TxnOffsetCommit v5 and forwards Produce v12 (coordinator/group/offsets/txn_features.py); it forwards
Produce v10+ because it rewrites their KIP-951 NodeEndpoints (coordinator/gateway/
leader_endpoints.py). A Java 4.4 producer then uses transactions v2: Produce v12 adds its
partitions implicitly, `sendOffsetsToTransaction` sends no AddOffsetsToTxn and TxnOffsetCommit
v5 to kcoord, which appends the offsets as the client's producer with Produce v12 (implicit add of
the state partition), and EndTxn bumps the producer epoch at every transaction.

What this proves: level 2 advertised through kcoord (ApiVersions), a commit applies the offsets
and an abort drops them (OffsetFetch through kcoord), and the client sent no AddOffsetsToTxn
(kcoord's request counter): so it used transactions v2, which the v1 path would not show.
Tansu speaks transactions v1 only; tests/integration/txn/test_eos_java_loop.py covers it.
"""
from __future__ import annotations

import asyncio

import pytest
from eos_clients import JavaEosLoop, fetch_offsets, stable
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode

from coordinator.protocol.apis import PRODUCE, TXN_OFFSET_COMMIT
from coordinator.upstream.client import UpstreamClient as KafkaLink
from support.admin import create_topic
from support.kcoord import FAST, serving
from support.metrics import kcoord_with_metrics, sample
from support.produce import produce_records
from support.wait import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.java]
PARTITIONS, INPUTS = 2, 12


@pytest.fixture
def kcoord(kafka44, names):
    """One `kcoord serve` in front of Kafka 4.4, defaults (TxnOffsetCommit served), with metrics."""
    yield from serving(kcoord_with_metrics(kafka44.bootstrap, f"__kcoord_{names.topic()}", config=FAST))


def api_versions(bootstrap: str):
    async def go():
        host, _, port = bootstrap.rpartition(":")
        link = await KafkaLink.connect([(host, int(port))], client_id="txn-v2-test")
        try:
            return await link.request(ApiVersionsRequest(client_software_name="kcoord-test",
                                                         client_software_version="1"), 10)
        finally:
            link.close()
    return asyncio.run(go())


def _levels(response) -> dict[str, int]:
    return {f.name: int(f.max_version_level) for f in response.finalized_features}


def _max(response, api_key: int) -> int:
    return next(int(k.max_version) for k in response.api_keys if k.api_key == api_key)


def test_transaction_version_2_and_produce_v12_are_advertised_through_kcoord(kcoord, kafka44):
    upstream, through = api_versions(kafka44.bootstrap), api_versions(kcoord.bootstrap)
    assert _levels(upstream).get("transaction.version") == 2, "the fixture finalizes transactions v2"
    assert through.error_code is ErrorCode.none
    assert _levels(through).get("transaction.version") == 2
    assert _max(through, TXN_OFFSET_COMMIT) == 6        # Kafka 4.4's (v6: topics by id, KIP-1319)
    assert _max(through, PRODUCE) == min(_max(upstream, PRODUCE), 13) >= 12


def _group_requests(kcoord, api: str) -> float:
    return sample(kcoord.metrics(), "kcoord_group_requests_total", api=api)


def test_java_send_offsets_commit_then_abort_with_transactions_v2(kcoord, kafka44, names, java_classes):
    src, dst, group = names.topic(), names.topic(), names.group()
    create_topic(kafka44.bootstrap, src, PARTITIONS)
    create_topic(kafka44.bootstrap, dst, 1)
    first = produce_records(kafka44.bootstrap, src, INPUTS)
    ends = {p: max([r.offset + 1 for r in first if r.partition == p], default=-1) for p in range(PARTITIONS)}
    loop = JavaEosLoop(kcoord.bootstrap, input=src, output=dst, group=group, txn_id=f"v2-{src}")
    try:
        assert "ok" in loop.init, loop.init
        # Round 1, committed: the offsets apply at the COMMIT marker.
        loop.ok(f"consume {INPUTS}")
        loop.ok("begin")
        loop.ok("produce")
        loop.ok("offsets")
        pending = fetch_offsets(kcoord.bootstrap, group, src, PARTITIONS)
        assert {p for p, (code, _) in pending.items() if code is ErrorCode.unstable_offset_commit} == \
            {p for p, e in ends.items() if e > 0}, pending
        loop.ok("commit")
        committed = wait_until(lambda: stable(kcoord.bootstrap, group, src, PARTITIONS), 30,
                               message="the COMMIT marker applies the offsets")
        assert committed == ends

        # Round 2, aborted (a new epoch under transactions v2): the committed offsets stay.
        more = produce_records(kafka44.bootstrap, src, INPUTS)
        loop.ok(f"consume {INPUTS}")
        loop.ok("begin")
        loop.ok("produce")
        sent = loop.ok("offsets")
        assert {int(p): o for p, o in sent["offsets"].items()} == \
            {p: max(r.offset + 1 for r in more if r.partition == p) for p in {r.partition for r in more}}
        loop.ok("abort")
        after_abort = wait_until(lambda: stable(kcoord.bootstrap, group, src, PARTITIONS), 30,
                                 message="the ABORT marker drops the pending offsets")
        assert after_abort == ends, "an aborted transaction's offsets never apply"
    finally:
        loop.shutdown()
    # Transactions v2: TxnOffsetCommit (v5) without AddOffsetsToTxn, which v1 sends first.
    assert _group_requests(kcoord, "TxnOffsetCommit") >= 2
    assert _group_requests(kcoord, "AddOffsetsToTxn") == 0
