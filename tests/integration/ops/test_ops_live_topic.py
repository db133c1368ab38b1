"""A live offsets topic on a real broker: written in topic format by the generator (real
transactions, so the broker writes the COMMIT/ABORT markers), read back with Fetch at
READ_UNCOMMITTED, and cleaned up by `downgrade-check --write-tombstones --apply`."""
from __future__ import annotations

import json

import pytest

from coordinator.cli import build_parser
from ops.describe import replay_model
from ops.generator import GeneratorSpec, generate
from ops.live import TopicReader
from ops.logsource import Problems
from ops.materialise import OffsetsReplay
from ops.segment import iter_buffer

SPEC = dict(records=4000, groups=16, partitions=2, seed=31)


def kcoord(capsys, *argv: str) -> tuple[int, str]:
    args = build_parser().parse_args(list(argv))
    rc = args.func(args)
    return rc, capsys.readouterr().out


# Tansu only: the record counts below assume an uncompacted copy. On Apache Kafka the copy
# (cleanup.policy=compact) is compacted while it is written: the generator's record timestamps
# are ~11 months old, so every append rolls a segment (segment.ms is measured from record time)
# and the cleaner drops superseded records (seen: 3862 of 3953 read back; the replayed groups
# still equal the log's). The other tests of this suite run on Kafka 4.3 too.
@pytest.mark.parametrize("upstream", ["tansu"], indirect=True)
def test_live_topic_reads_like_the_log_it_was_written_from(upstream, capsys):
    topic = "offsets-live-copy"
    rc, out = kcoord(capsys, "offsets", "generate", "--bootstrap", upstream.bootstrap, "--topic", topic,
                     *[f"--{k}={v}" for k, v in SPEC.items()])
    assert rc == 0 and "transaction markers" in out

    generated = generate(GeneratorSpec(**SPEC))
    batches = [lb for p, bs in generated.items()
               for lb in iter_buffer(b"".join(bs), len(b"".join(bs)), f"gen-{p}", p, Problems())]
    want = replay_model(OffsetsReplay().feed_all(batches))

    reader = TopicReader(upstream.bootstrap, topic)
    live = list(reader.read(Problems()))
    assert any(lb.batch.is_control_batch for lb in live), "no transaction markers were fetched"
    assert any(lb.batch.is_transactional and lb.batch.producer_id >= 0 for lb in live)
    got = replay_model(OffsetsReplay().feed_all(live))
    assert got["groups"] == want["groups"]
    for key in ("records", "tombstones", "commit_markers", "abort_markers", "unknown_types"):
        assert got["summary"][key] == want["summary"][key], key
    assert sum(reader.high_watermarks.values()) >= got["summary"]["records"]

    rc, out = kcoord(capsys, "offsets", "replay", "--bootstrap", upstream.bootstrap, "--topic", topic,
                     "--json")
    assert rc == 0 and json.loads(out)["groups"] == want["groups"]


def test_downgrade_tombstones_are_applied_only_when_asked(upstream, tmp_path, capsys):
    topic = "offsets-downgrade"
    spec = dict(SPEC, seed=32)
    assert kcoord(capsys, "offsets", "generate", "--bootstrap", upstream.bootstrap, "--topic", topic,
                  *[f"--{k}={v}" for k, v in spec.items()])[0] == 0
    live = ["--bootstrap", upstream.bootstrap, "--topic", topic]
    tombs = tmp_path / "tombstones.jsonl"
    rc, out = kcoord(capsys, "offsets", "downgrade-check", *live, "--json", "--write-tombstones",
                     str(tombs))
    before = json.loads(out)
    assert rc == 0 and before["tombstones"]["count"] > 0 and not before["tombstones"]["applied"]
    assert before["summary"]["live_new_protocol_keys"] > 0
    # Review only: nothing was written, the topic still has every live key.
    again = json.loads(kcoord(capsys, "offsets", "downgrade-check", *live, "--json")[1])
    assert again["summary"]["live_new_protocol_keys"] == before["summary"]["live_new_protocol_keys"]

    rc, out = kcoord(capsys, "offsets", "downgrade-check", *live, "--json", "--write-tombstones",
                     str(tombs), "--apply", "--apply-bootstrap", upstream.bootstrap,
                     "--apply-topic", topic)
    assert rc == 0 and json.loads(out)["tombstones"]["applied"]
    after = json.loads(kcoord(capsys, "offsets", "downgrade-check", *live, "--json")[1])
    left = {g["group"] for g in after["groups"] if g["live_new_protocol_keys"]}
    # Only groups that still have members keep new-protocol keys: those need their
    # consumers downgraded first (KIP-915).
    active = {g["group"] for g in before["tombstones"]["groups_left_alone"]}
    assert left <= active
    assert after["summary"]["live_new_protocol_keys"] < before["summary"]["live_new_protocol_keys"]
    assert after["offsets"]["compared"] == before["offsets"]["compared"]
