"""In-process coverage-guided fuzzing of the Produce record-batch check with atheris.

    .venv/bin/python fuzz/atheris_record_batch.py -runs=1000000 -rss_limit_mb=2048 \
        -malloc_limit_mb=1024 -artifact_prefix=/tmp/ [-max_len=4096] [CORPUS_DIR]

What the gateway does with one partition's records of a forwarded Produce:
`coordinator.protocol.record_batch_check.check_partition_records`. The first input byte
picks the shape:
- even: raw fuzzed bytes as the partition's records;
- odd: a batch a real encoder built (each codec), then header fields set to values the
  fuzzer picks among their extremes (0, ±1, 2**31-1, -2**31, 2**63-1, the count ± 1),
  the CRC recomputed or not, the batch cut short or followed by more bytes. This reaches
  the count and walk rules, which raw bytes almost never get past the CRC to.
Every input is checked with and without the CRC, the record walk and a Produce version.
The expected outcome is None or (2, 10, 76 or 87, a message); anything else is a crash,
and so is an allocation past -malloc_limit_mb: the check must allocate nothing in
proportion to a header's counts or lengths. An accepted uncompressed batch is read by aiokafka too: if it reads, it must
find exactly `records_count` records.
"""
from __future__ import annotations

import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import atheris  # noqa: E402
from crc32c import crc32c  # noqa: E402

from records.batch import CorruptBatchError, build_batch, iter_batches  # noqa: E402

with atheris.instrument_imports():
    from coordinator.protocol.record_batch_check import check_partition_records  # noqa: E402

CODES = {2, 10, 76, 87}
# DefaultRecordBatch's header fields: (byte offset, struct format)
FIELDS = ((0, ">q"), (8, ">i"), (16, ">b"), (17, ">I"), (21, ">h"), (23, ">i"), (43, ">q"),
          (53, ">i"), (57, ">i"))
EXTREMES = (0, 1, -1, 2, 7, 61, 2**31 - 1, -2**31, 2**63 - 1, -2**63, 2**15 - 1, 255)
SEEDS = tuple(
    build_batch([(b"k%d" % i, b"v" * size) for i in range(n)], timestamp_ms=1_700_000_000_000,
                compression=codec, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                base_sequence=0 if pid >= 0 else -1)
    for codec in range(5) for n, size, pid in ((1, 0, -1), (16, 40, 3)))


def _structured(fdp: atheris.FuzzedDataProvider) -> bytes:
    data = bytearray(SEEDS[fdp.ConsumeIntInRange(0, len(SEEDS) - 1)])
    count = struct.unpack_from(">i", data, 57)[0]
    if fdp.ConsumeBool():   # records_count with the last_offset_delta that matches it
        value = _value(fdp, count)
        struct.pack_into(">i", data, 57, _signed(value, 32))
        struct.pack_into(">i", data, 23, _signed(value - 1, 32))
    for _ in range(fdp.ConsumeIntInRange(0, 4)):
        at, fmt = FIELDS[fdp.ConsumeIntInRange(0, len(FIELDS) - 1)]
        bits = struct.calcsize(fmt) * 8
        value = _signed(_value(fdp, count), bits)
        struct.pack_into(fmt, data, at, value if fmt[-1].islower() else value % (1 << bits))
    if fdp.ConsumeBool():
        struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    cut = fdp.ConsumeIntInRange(0, 3)
    if cut == 1:
        del data[fdp.ConsumeIntInRange(0, len(data)):]
    elif cut == 2:
        data += fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 80))
    return bytes(data)


def _value(fdp: atheris.FuzzedDataProvider, count: int) -> int:
    choice = fdp.ConsumeIntInRange(0, len(EXTREMES) + 2)
    if choice < len(EXTREMES):
        return EXTREMES[choice]
    if choice < len(EXTREMES) + 2:
        return count + (1 if choice == len(EXTREMES) else -1)
    return fdp.ConsumeInt(8)


def _signed(value: int, bits: int) -> int:
    """`value` wrapped to a signed field of `bits` bits."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def _check(data: bytes) -> None:
    for verify_crc, walk, version in ((False, False, None), (False, True, 5), (True, False, 5), (True, True, None)):
        result = check_partition_records(memoryview(data), max_message_bytes=1_048_588,
                                         verify_crc=verify_crc, walk_records=walk, api_version=version)
        if result is None:
            continue
        code, message = result
        if code not in CODES or not isinstance(message, str) or not message:
            raise AssertionError(f"unexpected result {result!r}")
        if "record" not in message and "magic" not in message:
            raise AssertionError(f"message names no field: {message!r}")
    if len(data) > 22 and data[22] & 0x07 == 0 and check_partition_records(
            data, max_message_bytes=1_048_588, verify_crc=True, walk_records=True) is None:
        _read_back(data)


def _read_back(data: bytes) -> None:
    try:
        batches = list(iter_batches(data, check_crc=True))
    except CorruptBatchError:
        return        # aiokafka reads more of a record than the walk (keys, headers)
    count = struct.unpack_from(">i", data, 57)[0]
    if len(batches) != 1 or len(batches[0].records) != count:
        raise AssertionError(f"accepted, but aiokafka reads {[len(b.records) for b in batches]} "
                             f"records where records_count is {count}")


def TestOneInput(data: bytes) -> None:  # noqa: N802 (atheris' name)
    if not data:
        return
    if data[0] % 2:
        _check(_structured(atheris.FuzzedDataProvider(data[1:])))
    else:
        _check(data[1:])


def main() -> None:
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
