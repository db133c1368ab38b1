"""Single-process decode + replay throughput of `kcoord offsets replay` (one core).

    python bench/bench_replay.py [--records 1000000] [--dir DIR] [--profile] [--proposal]

Generates a realistic offsets log (ops.generator: ~90 % offset commits, both protocols,
conversions, transactions, tombstones, unknown types) as segment files, then measures,
best of --runs in process CPU time (pinned to one core when possible):
- read: segment files -> record batches (CRC checked, aiokafka's C batch reader);
- read + decode: plus `records.decode_record` for every record;
- read + decode + replay: the whole `OffsetsReplay` path, i.e. GroupCoordinatorShard.replay
  (the coordinator's own Replayer) for every record: the figure the goal (500k/s) is about.
--profile prints where the replay path spends its time (cProfile, top functions).
--proposal measures the same path with the fast paths proposed for records/ and
coordinator/ (see `proposed_fast_paths`), patched in for this process only.
"""
from __future__ import annotations

import argparse
import cProfile
import logging
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from ops.generator import GeneratorSpec, write_segments  # noqa: E402
from ops.logsource import Problems, discover  # noqa: E402
from ops.logfiles import iter_files  # noqa: E402
from ops.materialise import OffsetsReplay  # noqa: E402
from records import codec, decode_record  # noqa: E402


def best_of(runs: int, fn) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(runs):
        t0 = time.process_time()
        result = fn()
        best = min(best, time.process_time() - t0)
    return best, result


def read_only(files):
    n = 0
    for lb in iter_files(files, Problems()):
        n += len(lb.batch.records)
    return n


def read_decode(files):
    n = 0
    codec._KEY_CACHE.clear()
    for lb in iter_files(files, Problems()):
        if lb.batch.is_control_batch:
            continue
        for r in lb.batch.records:
            decode_record(r.key, r.value)
            n += 1
    return n


def read_decode_replay(files):
    codec._KEY_CACHE.clear()
    replay = OffsetsReplay(Problems()).feed_all(iter_files(files, Problems()))
    return replay.stats.records


def proposed_fast_paths() -> None:
    """The change proposed to the owners of records/ and coordinator/group/ (see the report):
    1. OffsetAndMetadata built without the frozen-dataclass __init__ (object.__setattr__ per
       field costs ~0.9 µs per commit): a module-level `new_offset(...)` using the slot
       descriptors, as records/codec.py already does for OffsetCommitKey.
    2. Replayer._offset_commit reads OffsetCommitValue fields directly (no getattr with
       defaults) and inlines the non-transactional OffsetStore.put (two dict lookups).
    3. decode_record: the v4 empty-metadata commit (what Kafka writes for nearly every
       commit) decoded with one struct.unpack, as encode_value already does."""
    import struct

    from coordinator.group import replay as rp
    from coordinator.group.classic.group import ClassicGroup
    from coordinator.group.offsets import store as om
    from records import CoordinatorRecord, OffsetCommitValue, schemas

    OAM = om.OffsetAndMetadata
    s0, s1, s2, s3, s4, s5, s6 = (getattr(OAM, f).__set__ for f in (
        "offset", "leader_epoch", "metadata", "commit_timestamp", "expire_timestamp", "topic_id",
        "record_offset"))
    new = object.__new__

    def new_offset(o, le, md, ts, ex, tid, ro):
        x = new(OAM)
        s0(x, o), s1(x, le), s2(x, md), s3(x, ts), s4(x, ex), s5(x, tid), s6(x, ro)
        return x

    def _offset_commit(self, key, value, offset, producer_id):
        if value is None:
            self.offsets.delete(key.group, key.topic, key.partition)
            return
        group = key.group
        if group not in self.groups:
            self.groups[group] = ClassicGroup(group)
        if type(value) is OffsetCommitValue:
            v = new_offset(value.offset, value.leader_epoch, value.metadata, value.commit_timestamp,
                           value.expire_timestamp, value.topic_id, offset)
        else:   # LegacyOffsetCommitValue
            v = new_offset(value.offset, -1, value.metadata or "", value.commit_timestamp, -1, None,
                           offset)
        if producer_id != -1:
            self.offsets.put(group, key.topic, key.partition, v, producer_id)
            return
        store = self.offsets.offsets
        topics = store.get(group)
        if topics is None:
            topics = store[group] = {}
        parts = topics.get(key.topic)
        if parts is None:
            parts = topics[key.topic] = {}
        parts[key.partition] = v

    rp._HANDLERS[rp.OffsetCommitKey] = _offset_commit
    rp._HANDLERS[rp.LegacyOffsetCommitKey] = _offset_commit

    v4 = struct.Struct(">hqiBqB").unpack
    zero = schemas.ZERO_UUID
    ocv_new = object.__new__
    f = [getattr(OffsetCommitValue, n).__set__ for n in (
        "offset", "leader_epoch", "metadata", "commit_timestamp", "expire_timestamp", "topic_id",
        "unknown_tagged_fields")]
    original = codec.decode_record
    cache = codec._KEY_CACHE

    def decode_record_fast(key, value, **kw):
        k = cache.get(key) if type(key) is bytes else None
        if k is not None and value is not None and len(value) == 24 and value[1] == 4 \
                and value[0] == 0 and value[14] == 1 and value[23] == 0:
            _, o, le, _, ts, _ = v4(value)
            val = ocv_new(OffsetCommitValue)
            f[0](val, o), f[1](val, le), f[2](val, ""), f[3](val, ts), f[4](val, -1)
            f[5](val, zero), f[6](val, ())
            return CoordinatorRecord(k, val, 4)
        return original(key, value, **kw)

    import ops.materialise as mat
    mat.decode_record = decode_record_fast
    codec.decode_record = decode_record_fast


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--dir", help="reuse (or keep) the generated log here")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--proposal", action="store_true", help="measure the proposed fast paths")
    ap.add_argument("--key-cache", type=int, default=None,
                    help="records.codec key cache size for the --proposal run (default: unchanged)")
    args = ap.parse_args()
    logging.getLogger("kcoord.replay").setLevel(logging.ERROR)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

    directory = Path(args.dir or tempfile.mkdtemp(prefix="kcoord-bench-replay-"))
    if not any(directory.rglob("*.log")):
        t0 = time.monotonic()
        sink = write_segments(directory, GeneratorSpec(
            records=args.records, groups=args.groups, partitions=args.partitions, topics=20,
            topic_partitions=12, seed=1))
        print(f"generated {sink.records:,} records in {time.monotonic() - t0:.1f}s under {directory}")
    files = discover([directory])
    size = sum(f.stat().st_size for f in files)
    print(f"log: {len(files)} segment files, {size / 1e6:.1f} MB; one core, best of {args.runs} "
          f"(process CPU time)")

    for label, fn in (("read batches", read_only), ("read + decode", read_decode),
                      ("read + decode + replay (OffsetsReplay)", read_decode_replay)):
        seconds, n = best_of(args.runs, lambda: fn(files))
        print(f"{label:<44} {n / seconds:>12,.0f} records/s  ({1e6 * seconds / n:.2f} µs/record, "
              f"{n:,} records)")
    if args.profile:
        prof = cProfile.Profile()
        prof.runcall(read_decode_replay, files)
        pstats.Stats(prof).sort_stats("tottime").print_stats(14)
    if args.proposal:
        proposed_fast_paths()
        if args.key_cache:
            codec._KEY_CACHE_MAX = args.key_cache
        seconds, n = best_of(args.runs, lambda: read_decode_replay(files))
        print(f"{'read + decode + replay, proposed fast paths':<44} {n / seconds:>12,.0f} records/s  "
              f"({1e6 * seconds / n:.2f} µs/record)")


if __name__ == "__main__":
    main()
