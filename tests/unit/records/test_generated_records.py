"""The record classes generated from Kafka 4.4's `kafka-group-coordinator` jar against
kcoord's own `__consumer_offsets` codec (`records/`), byte for byte.

For every record type and version that `records/` reads and writes, random values of the
generated class are encoded by kio, decoded by `records/` and encoded again by `records/`:
the bytes must be the same both ways. The streams group types (17, 19-23), which `records/`
reads into the generated classes, must also decode to the value kio reads. The generated types
`records/` does not know yet (share groups 10-15) round-trip through kio alone.
"""
from __future__ import annotations

import dataclasses
import importlib
import random
import struct

import pytest

from coordinator.protocol.codec import decode_body, encode_body
from fuzz.samples import sample
from records import codec
from records.generated.index import RECORDS
from records.types import RecordType

KNOWN = {int(t) for t in RecordType}
# Where kio's writer and Kafka's differ (kafka-coordinator.md §2.3, records/_consumer.py), and
# so records/ and kio's bytes for the generated class differ. Each entry must still differ.
KIO_DIFFERS = {
    (1, "value", 4): "kio writes a tagged field equal to its default (a zero TopicId); Kafka omits it",
    (5, "value", 0): "kio writes a present nullable tagged struct (ClassicMemberMetadata) "
                     "without Kafka's presence varint",
    (8, "value", 0): "kio writes an empty tagged array whose default is null (AssignmentEpochs); "
                     "Kafka's generated default is the empty array, which it omits",
}


def _class(module: str, kind: str, version: int) -> type:
    mod = importlib.import_module(f"records.generated.{module}.v{version}.{kind}")
    name = "".join(p.capitalize() for p in module.split("_")) + kind.capitalize()
    return getattr(mod, name)


def _cases(known: bool) -> list[tuple[int, str, str, int]]:
    return sorted(r for r in RECORDS if (r[0] in KNOWN) == known)


@pytest.mark.parametrize("record", _cases(known=True), ids=lambda r: f"{r[1]}-{r[2]}-v{r[3]}")
def test_kafka_bytes_and_kcoords_codec_agree(record: tuple[int, str, str, int]) -> None:
    record_type, module, kind, version = record
    cls = _class(module, kind, version)
    rng = random.Random(f"{module}{kind}{version}")
    agreed = []
    for _ in range(25):
        body = encode_body(sample(cls, rng))
        if kind == "key":
            data = struct.pack(">h", record_type) + body
            agreed.append(codec.encode_key(codec.decode_key(data)) == data)
        else:
            data = struct.pack(">h", version) + body
            try:
                value, decoded_version = codec.decode_value(record_type, data)
            except ValueError:
                agreed.append(False)
                continue
            assert decoded_version == version
            if isinstance(value, cls):
                # records/ reads the generated class itself (streams_records.py): the value
                # is the one kio's reader builds from the same bytes.
                assert dataclasses.asdict(value) == dataclasses.asdict(decode_body(cls, data, 2))
            agreed.append(codec.encode_value(value, version) == data)
    reason = KIO_DIFFERS.get((record_type, kind, version))
    if reason is None:
        assert all(agreed)
    else:
        assert not all(agreed), f"no longer differs, drop the entry: {reason}"


@pytest.mark.parametrize("record", _cases(known=False), ids=lambda r: f"{r[1]}-{r[2]}-v{r[3]}")
def test_a_record_records_does_not_know_yet_round_trips_through_kio(record) -> None:
    _, module, kind, version = record
    cls = _class(module, kind, version)
    rng = random.Random(f"{module}{kind}{version}")
    for _ in range(10):
        message = sample(cls, rng)
        assert decode_body(cls, encode_body(message), 0) == message


def test_every_record_type_kcoord_knows_is_generated() -> None:
    assert KNOWN <= {r[0] for r in RECORDS}
    assert {17, 19, 20, 21, 22, 23} <= {r[0] for r in RECORDS}  # streams groups
