"""`kcoord offsets load` + `kcoord serve`: a running coordinator that loaded a log answers
OffsetFetch, DescribeGroups and ConsumerGroupDescribe exactly as the offline replay says
(and as the coordinator's handlers build the answers from that replay)."""
from __future__ import annotations

from ops_serve import KcoordServe

from coordinator.cli import build_parser
from coordinator.group import group_admin
from coordinator.group.kio_util import schema
from coordinator.group.offsets import ops as offset_ops
from coordinator.group.offsets.requests import fetch_answer
from ops.describe import replay_model
from ops.generator import GeneratorSpec, topics, write_segments
from ops.live import cluster_image
from ops.logfiles import iter_files
from ops.logsource import Problems, discover
from ops.materialise import OffsetsReplay
from ops.produce_log import create_topic
from support.raw_client import call_with as call
from support.wait import wait_until

OFFSET_FETCH, DESCRIBE_GROUPS, CONSUMER_GROUP_DESCRIBE = 9, 15, 69
STATE_PARTITIONS = 5


def kcoord(*argv: str) -> int:
    args = build_parser().parse_args(list(argv))
    return args.func(args)


def offsets_of(group) -> dict:
    return {(t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.metadata,
                                          p.error_code) for t in group.topics for p in t.partitions}


def classic_view(g) -> tuple:
    return (g.error_code, g.group_state, g.protocol_type, g.protocol_data,
            sorted((m.member_id, m.client_id, m.client_host, m.member_metadata, m.member_assignment)
                   for m in g.members))


def consumer_view(g) -> tuple:
    def tps(a):
        return sorted((t.topic_id, t.topic_name, tuple(sorted(t.partitions)))
                      for t in a.topic_partitions)
    return (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name,
            sorted((m.member_id, m.member_epoch, m.client_id, m.client_host, m.member_type,
                    tuple(m.subscribed_topic_names), m.subscribed_topic_regex, tps(m.assignment),
                    tps(m.target_assignment)) for m in g.members))


def create_state_topic_with_leaders(bootstrap: str, topic: str, partitions: int) -> None:
    from support.admin import admin_client
    from support.admin import create_topic as create_and_wait

    create_and_wait(bootstrap, topic, partitions, config={"cleanup.policy": "compact"}, timeout=30)
    admin = admin_client(bootstrap)

    def led() -> bool:
        md = admin.list_topics(topic, timeout=10).topics[topic]
        return all(p.leader >= 0 and p.error is None for p in md.partitions.values())

    wait_until(led, 30, 0.1, f"a leader for every partition of {topic}")


def test_serve_answers_for_a_loaded_log_as_the_replay_does(upstream, tmp_path):
    bootstrap = upstream.bootstrap
    base = GeneratorSpec(records=6000, groups=24, partitions=3, seed=13)
    for t in topics(base):                         # the cluster the log's groups consumed
        create_topic(bootstrap, t.name, t.partitions)

    def image_with_the_topics():                   # Kafka's broker learns new topics a moment later
        image = cluster_image(bootstrap)
        return image if all(t.name in image.topics_by_name for t in topics(base)) else None

    image = wait_until(image_with_the_topics, 30, 0.2, "the created topics in the cluster's metadata")
    spec = GeneratorSpec(records=6000, groups=24, partitions=3, seed=13,
                         topic_ids={t.name: image.topics_by_name[t.name].topic_id
                                    for t in topics(base)})
    write_segments(tmp_path / "log", spec)

    state_topic = "kcoord-rehearsal"
    # On Kafka a just-created partition answers NOT_LEADER_OR_FOLLOWER for a moment; `offsets
    # load` now retries that (ops/live.py Retry; tests/unit/ops/test_ops_live_retry.py, and
    # test_ops_kafka_log.py loads into a topic it creates). Creating the topic first, with
    # leaders, keeps this test about load + serve.
    create_state_topic_with_leaders(bootstrap, state_topic, STATE_PARTITIONS)
    assert kcoord("offsets", "load", str(tmp_path / "log"), "--to", bootstrap, "--state-topic",
                  state_topic, "--state-partitions", str(STATE_PARTITIONS)) == 0
    # A second load into the same topic would merge two logs: refused.
    assert kcoord("offsets", "load", str(tmp_path / "log"), "--to", bootstrap, "--state-topic",
                  state_topic, "--state-partitions", str(STATE_PARTITIONS)) == 2

    replay = OffsetsReplay(Problems()).feed_all(iter_files(discover([tmp_path / "log"]), Problems()))
    model = replay_model(replay, image=image)
    groups = {g["group"]: g for g in model["groups"]}
    consumer_groups = [g for g, m in groups.items() if m["type"] == "consumer"]
    assert consumer_groups and len(consumer_groups) < len(groups)

    serve = KcoordServe(bootstrap, state_topic, STATE_PARTITIONS, tmp_path / "serve.log")
    try:
        serve.wait_ready()
        # v9: kcoord's service reads member_id/member_epoch, which v8 groups lack.
        fetched = call(serve.address, OFFSET_FETCH, 9, require_stable=False, groups=tuple(
            schema("offset_fetch", 9, "request").OffsetFetchRequestGroup(
                group_id=g, member_id=None, member_epoch=-1, topics=None) for g in sorted(groups)))
        described = call(serve.address, DESCRIBE_GROUPS, 5, groups=tuple(sorted(groups)),
                         include_authorized_operations=False)
        cg_described = call(serve.address, CONSUMER_GROUP_DESCRIBE, 1,
                            group_ids=tuple(sorted(consumer_groups)),
                            include_authorized_operations=False)
    finally:
        serve.stop()

    shard_of = {gid: replay.shards[p] for gid, (p, _) in replay.groups().items()}
    fetch_mod, dg_mod = schema("offset_fetch", 9), schema("describe_groups", 5)
    cg_mod = schema("consumer_group_describe", 1)
    for g in fetched.groups:
        want = {(o["topic"], o["partition"]): o["offset"] for o in groups[g.group_id]["offsets"]}
        assert {k: v[0] for k, v in offsets_of(g).items()} == want, g.group_id
        offline = offset_ops.fetch_offsets(shard_of[g.group_id], fetch_answer(9), g.group_id, None, False)
        assert offsets_of(g) == offsets_of(fetch_mod.OffsetFetchResponseGroup(
            group_id=g.group_id, topics=tuple(offline), error_code=g.error_code))
    for g in described.groups:
        offline = group_admin.describe_group(shard_of[g.group_id], dg_mod, g.group_id, False, False)
        assert classic_view(g) == classic_view(offline), g.group_id
        if groups[g.group_id]["type"] == "classic":
            assert g.group_state == groups[g.group_id]["state"], g.group_id
    for g in cg_described.groups:
        offline = group_admin.describe_consumer_group(shard_of[g.group_id], cg_mod, g.group_id, False)
        assert consumer_view(g) == consumer_view(offline), g.group_id
        m = groups[g.group_id]
        assert (g.group_epoch, g.assignment_epoch, len(g.members)) == \
            (m["group_epoch"], m["assignment_epoch"], len(m["members"]))
        for member in g.members:
            named = {t.topic_name: sorted(t.partitions) for t in member.assignment.topic_partitions}
            want = next(x for x in m["members"] if x["member_id"] == member.member_id)
            assert named == want["assignment"]
