"""What a state partition's log holds, read straight from the upstream broker, for the
zombie tests of the fenced modes (docs/design/fencing.md): every batch with its producer id
and epoch, the fence records of `fencing=epoch`, and the committed offsets the log carries.

Rules: read_uncommitted with markers visible (Fetch v12, the partition's only broker: the
single-node test upstreams), as kcoord's own loader reads. A transactional batch counts at
its COMMIT marker and is dropped at ABORT; a plain (idempotent) batch counts where it lands.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from coordinator.runtime.epoch_producers import _FENCE_VALUE, is_fence_record
from records.batch import ControlMarker, RecordBatch, iter_batches
from records.codec import decode_key, decode_offset_commit_fields

from . import raw_client

FETCH = 1
MAX_BYTES = 8 << 20


def read_batches(bootstrap: str, topic: str, partition: int) -> list[RecordBatch]:
    """Every batch of `topic`-`partition` from its start to the high watermark."""
    t = raw_client.request_types(FETCH, 12)
    out: list[RecordBatch] = []
    offset = 0
    for _ in range(1000):
        r = raw_client.call_with(
            bootstrap, FETCH, 12, cluster_id=None, replica_id=-1, max_wait=timedelta(milliseconds=10),
            min_bytes=0, max_bytes=MAX_BYTES, isolation_level=0, session_id=0, session_epoch=-1,
            topics=(t.FetchTopic(topic=topic, partitions=(t.FetchPartition(
                partition=partition, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                log_start_offset=-1, partition_max_bytes=MAX_BYTES),)),),
            forgotten_topics_data=(), rack_id="")
        part = r.responses[0].partitions[0]
        assert part.error_code == 0, f"Fetch {topic}-{partition} at {offset}: {part.error_code}"
        start = offset
        for b in iter_batches(part.records or b"", allow_partial_tail=True):
            if b.last_offset >= offset:
                out.append(b)
                offset = b.next_offset
        if offset >= part.high_watermark or offset == start:
            return out
    raise AssertionError(f"{topic}-{partition}: no end after 1000 fetches")


@dataclass
class StateLog:
    batches: list[RecordBatch]
    # (offset, producer id, epoch) of each fence record (fencing=epoch), in log order.
    fences: list[tuple[int, int, int]] = field(default_factory=list)
    # (group, topic, partition) -> committed offset, as a replay of the log ends.
    offsets: dict[tuple[str, str, int], int] = field(default_factory=dict)

    def epoch_regressions(self) -> list[tuple[int, int, int, int]]:
        """(offset, producer id, epoch, an earlier epoch of that id) for each batch written
        under an older epoch than one already in the log: a write accepted after its fence."""
        newest: dict[int, int] = {}
        out = []
        for b in self.batches:
            if b.producer_id < 0:
                continue
            seen = newest.get(b.producer_id, -1)
            if b.producer_epoch < seen:
                out.append((b.base_offset, b.producer_id, b.producer_epoch, seen))
            newest[b.producer_id] = max(seen, b.producer_epoch)
        return out


def read_state_log(bootstrap: str, topic: str, partition: int) -> StateLog:
    log = StateLog(read_batches(bootstrap, topic, partition))
    pending: dict[int, list] = {}

    def apply(records) -> None:
        for rec in records:
            if rec.key is None or is_fence_record(rec.key) or rec.key[:2] not in (b"\x00\x00", b"\x00\x01"):
                continue
            key = decode_key(rec.key)
            fields = decode_offset_commit_fields(key, rec.value)
            k = (key.group, key.topic, key.partition)
            if fields is None:
                log.offsets.pop(k, None)
            else:
                log.offsets[k] = fields[0]

    for b in log.batches:
        if b.is_control_batch:
            held = pending.pop(b.producer_id, [])
            if b.control_type == ControlMarker.COMMIT:
                apply(held)
            continue
        for rec in b.records:
            if is_fence_record(rec.key):
                _, pid, epoch = _FENCE_VALUE.unpack(rec.value)
                log.fences.append((rec.offset, pid, epoch))
        if b.is_transactional:
            pending.setdefault(b.producer_id, []).extend(b.records)
        else:
            apply(b.records)
    return log

