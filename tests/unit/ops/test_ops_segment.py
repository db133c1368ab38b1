"""Segment files: every codec, CRC checks, truncation, resynchronisation after damage."""
from __future__ import annotations

import pytest

from ops.describe import replay_model
from ops.generator import GeneratorSpec, write_segments
from ops.logsource import OffsetsLogError, Problems, discover, partition_of_path
from ops.logfiles import iter_files
from ops.materialise import OffsetsReplay
from records.batch import (
    COMPRESSION_GZIP, COMPRESSION_LZ4, COMPRESSION_NONE, COMPRESSION_SNAPPY, COMPRESSION_ZSTD,
)

from .logs import LogBuilder, commit


def _segment(tmp_path, builder: LogBuilder, partition: int = 3):
    path = tmp_path / f"__consumer_offsets-{partition}" / "00000000000000000000.log"
    path.parent.mkdir(parents=True)
    path.write_bytes(builder.bytes())
    return path


def _three_batches() -> LogBuilder:
    return (LogBuilder().write(commit("g", "t", 0, 1), commit("g", "t", 1, 2))
            .write(commit("g", "t", 0, 3)).write(commit("g", "t", 2, 4)))


def test_partition_comes_from_the_directory_name(tmp_path):
    path = _segment(tmp_path, _three_batches(), partition=17)
    assert partition_of_path(path) == 17
    batches = list(iter_files(discover([tmp_path]), Problems()))
    assert {lb.partition for lb in batches} == {17} and len(batches) == 3


@pytest.mark.parametrize("codec", [COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY,
                                   COMPRESSION_LZ4, COMPRESSION_ZSTD])
def test_every_codec_replays_to_the_same_state(tmp_path, codec):
    spec = GeneratorSpec(records=3000, groups=10, seed=5, partitions=2, compression=codec)
    write_segments(tmp_path / "log", spec)
    plain = GeneratorSpec(records=3000, groups=10, seed=5, partitions=2)
    write_segments(tmp_path / "plain", plain)
    got = replay_model(OffsetsReplay().feed_all(iter_files(discover([tmp_path / "log"]), Problems())))
    want = replay_model(OffsetsReplay().feed_all(iter_files(discover([tmp_path / "plain"]),
                                                           Problems())))
    assert got["groups"] == want["groups"] and got["groups"]


def test_bad_crc_stops_with_file_and_byte_position(tmp_path):
    builder = _three_batches()
    second = len(builder.batches[0])
    data = bytearray(builder.bytes())
    data[second + 70] ^= 0xFF            # inside the second batch's records: CRC fails
    path = _segment(tmp_path, builder)
    path.write_bytes(bytes(data))
    with pytest.raises(OffsetsLogError) as e:
        list(iter_files([path], Problems()))
    assert str(path) in str(e.value) and f"at byte {second}" in str(e.value)
    assert "CRC mismatch" in str(e.value)


def test_skip_corrupt_resumes_at_the_next_good_batch(tmp_path):
    builder = _three_batches()
    second = len(builder.batches[0])
    data = bytearray(builder.bytes())
    data[second + 70] ^= 0xFF
    path = _segment(tmp_path, builder)
    path.write_bytes(bytes(data))
    problems = Problems(skip=True, echo=False)
    batches = list(iter_files([path], problems))
    assert [lb.batch.base_offset for lb in batches] == [0, 3]
    (p,) = problems.items
    assert p.position == second and p.skipped == f"{len(builder.batches[1])} bytes"


def test_garbage_between_batches_is_skipped_when_asked(tmp_path):
    builder = _three_batches()
    first = len(builder.batches[0])
    data = builder.bytes()
    data = data[:first] + b"\x07" * 100 + data[first:]
    path = _segment(tmp_path, builder)
    path.write_bytes(data)
    problems = Problems(skip=True, echo=False)
    assert [lb.batch.base_offset for lb in iter_files([path], problems)] == [0, 2, 3]
    assert problems.items[0].position == first


def test_truncated_segment_is_an_error_naming_the_position(tmp_path):
    builder = _three_batches()
    path = _segment(tmp_path, builder)
    path.write_bytes(builder.bytes()[:-10])
    last = len(builder.bytes()) - len(builder.batches[-1])
    with pytest.raises(OffsetsLogError, match=f"at byte {last}: truncated batch"):
        list(iter_files([path], Problems()))
    problems = Problems(skip=True, echo=False)
    assert len(list(iter_files([path], problems))) == 2 and problems.items[0].position == last


def test_zero_padding_at_the_end_is_not_damage(tmp_path):
    builder = _three_batches()
    path = _segment(tmp_path, builder)
    path.write_bytes(builder.bytes() + bytes(4096))
    problems = Problems()
    assert len(list(iter_files([path], problems))) == 3 and not problems


def test_segments_roll_and_are_read_in_base_offset_order(tmp_path):
    spec = GeneratorSpec(records=4000, groups=10, seed=9, partitions=1)
    sink = write_segments(tmp_path, spec, segment_bytes=20_000)
    assert len(sink.paths) > 3
    batches = list(iter_files(discover([tmp_path]), Problems()))
    offsets = [lb.batch.base_offset for lb in batches]
    assert offsets == sorted(offsets) and offsets[0] == 0
    assert [p.name for p in discover([tmp_path])] == sorted(p.name for p in sink.paths)
