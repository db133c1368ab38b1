"""In-process coverage-guided fuzzing of the `__consumer_offsets` record codec with atheris.

    .venv/bin/python fuzz/atheris_records.py -runs=200000 -rss_limit_mb=2048 -artifact_prefix=/tmp/ \
        [-max_len=4096] [CORPUS_DIR]

What a state-topic load does with bytes from the log: `records.decode_record` on a key
and a value, and `records.batch.iter_batches` on whole batches. The first input byte
picks the shape:
- 0-5: a key of a known record type (so the fuzzer starts inside the value decoders),
  a value version in that type's range plus a little outside it, then fuzzed bytes;
- 6: a raw key and a raw value (or a tombstone), both fuzzed;
- 7: a fuzzed buffer of record batches, each record decoded as the loader does.
The expected outcomes are a record, `records.DECODE_ERRORS` (the codec's errors, which
name the field and the byte) and `CorruptBatchError`; anything else is a crash, and so is
an allocation past -rss_limit_mb / -malloc_limit_mb (the length bombs of issue 10).
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import atheris  # noqa: E402

with atheris.instrument_imports():
    import records  # noqa: E402
    from records import DECODE_ERRORS, decode_record  # noqa: E402
    from records.batch import CorruptBatchError, iter_batches  # noqa: E402
    from records.codec import decode_offset_commit_fields, decode_offset_commit_key  # noqa: E402

# Trailing-bytes warnings are expected here by the thousand; the counter still counts.
logging.disable(logging.WARNING)

# record type -> (key bytes after the type, highest value version)
_KEY_BODIES = {
    0: (b"\x00\x01g\x00\x01t\x00\x00\x00\x01", 0),
    1: (b"\x00\x01g\x00\x01t\x00\x00\x00\x01", 4),
    2: (b"\x00\x01g", 4),
    3: (b"\x00\x01g", 0),
    4: (b"\x00\x01g", 0),
    5: (b"\x00\x01g\x00\x01m", 0),
    6: (b"\x00\x01g", 0),
    7: (b"\x00\x01g\x00\x01m", 0),
    8: (b"\x00\x01g\x00\x01m", 0),
    16: (b"\x00\x01g\x00\x02t.", 0),
    17: (b"\x00\x01g", 0),  # streams group records (records/streams_records.py)
    19: (b"\x00\x01g\x00\x01m", 0),
    20: (b"\x00\x01g", 0),
    21: (b"\x00\x01g\x00\x01m", 0),
    22: (b"\x00\x01g\x00\x01m", 0),
    23: (b"\x00\x01g", 0),
}
_TYPES = sorted(_KEY_BODIES)


def _typed(fdp: atheris.FuzzedDataProvider) -> None:
    rtype = _TYPES[fdp.ConsumeIntInRange(0, len(_TYPES) - 1)]
    body, highest = _KEY_BODIES[rtype]
    key = rtype.to_bytes(2, "big") + body
    version = fdp.ConsumeIntInRange(-1, highest + 1)
    value = version.to_bytes(2, "big", signed=True) + fdp.ConsumeBytes(fdp.remaining_bytes())
    _decode(key, value)
    if rtype in (0, 1):  # the bulk loader's own entry points (coordinator/group/bulk_replay.py)
        try:
            k = decode_offset_commit_key(key, offset=0)
            decode_offset_commit_fields(k, value, offset=0)
        except DECODE_ERRORS:
            pass


def _raw(fdp: atheris.FuzzedDataProvider) -> None:
    key = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 64))
    tombstone = fdp.ConsumeBool()
    value = None if tombstone else fdp.ConsumeBytes(fdp.remaining_bytes())
    _decode(key, value)


def _batches(data: bytes) -> None:
    try:
        for batch in iter_batches(data, check_crc=False):
            for r in batch.records:
                if not batch.is_control_batch:
                    _decode(r.key, r.value)
    except CorruptBatchError:
        pass


def _decode(key: bytes | None, value: bytes | None) -> None:
    try:
        result = decode_record(key, value, topic="fuzz", partition=0, offset=0)
    except DECODE_ERRORS as e:
        if "fuzz" not in str(e):
            raise AssertionError(f"decode error without the record's location: {e}") from e
        return
    if not isinstance(result, (records.CoordinatorRecord, records.UnknownRecord)):
        raise AssertionError(f"decode_record returned {type(result).__name__}")


def TestOneInput(data: bytes) -> None:  # noqa: N802 (atheris' name)
    if not data:
        return
    shape = data[0] % 8
    if shape == 7:
        _batches(data[1:])
        return
    fdp = atheris.FuzzedDataProvider(data[1:])
    if shape == 6:
        _raw(fdp)
    else:
        _typed(fdp)


def main() -> None:
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
