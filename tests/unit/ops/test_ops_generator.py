"""The log generator: deterministic, and holding everything the tools must cope with."""
from __future__ import annotations

from collections import Counter

from ops.generator import GeneratorSpec, generate
from ops.logsource import Problems
from ops.segment import iter_buffer
from records import decode_record


def _records(spec):
    out = []
    for p, batches in generate(spec).items():
        buf = b"".join(batches)
        out.extend((p, lb.batch) for lb in iter_buffer(buf, len(buf), "gen", p, Problems()))
    return out


def test_same_seed_same_bytes_other_seed_other_bytes():
    spec = GeneratorSpec(records=3000, groups=12, seed=1)
    assert generate(spec) == generate(spec)
    assert generate(spec) != generate(GeneratorSpec(records=3000, groups=12, seed=2))


def test_the_log_holds_every_kind_of_record():
    batches = _records(GeneratorSpec(records=15_000, groups=40, seed=8, partitions=4))
    types, versions, tombstones = Counter(), Counter(), 0
    markers = Counter(b.control_type for _, b in batches if b.is_control_batch)
    for _, b in batches:
        if b.is_control_batch:
            continue
        for r in b.records:
            rec = decode_record(r.key, r.value)
            rtype = getattr(rec, "record_type", None) if rec.__class__.__name__ == "UnknownRecord" \
                else rec.key.record_type
            types[rtype] += 1
            tombstones += r.value is None
            if rtype == 1 and r.value is not None:
                versions[rec.value_version] += 1
    assert set(types) >= {1, 2, 3, 4, 5, 6, 7, 8, 16, 10, 11, 18, 42}
    assert markers[0] > 0 and markers[1] > 0                  # ABORT and COMMIT
    assert tombstones > 0 and set(versions) == {1, 4}
    assert {p for p, _ in batches} == {0, 1, 2, 3}
    assert any(b.is_transactional and not b.is_control_batch for _, b in batches)
    assert sum(len(b.records) for _, b in batches) >= 15_000
