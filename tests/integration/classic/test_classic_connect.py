"""A distributed Kafka Connect 4.4 worker through the gateway. The worker is a member of
a classic group of protocol type "connect" (its leader assigns connectors and tasks), and
its sink task consumes in a classic "consumer" group of its own: both groups live in
kcoord. A file source → topic → file sink pipeline (the tests' own line-file connectors,
support.connect) carries lines end to end."""
from __future__ import annotations

from confluent_kafka import ConsumerGroupState, ConsumerGroupType
from confluent_kafka.admin import AdminClient

from support.admin import committed_offsets, create_topic
from support.connect import SINK_CONNECTOR, SOURCE_CONNECTOR, ConnectWorker, wait_for_lines
from support.wait import wait_until

from support.raw_client import call_with as call

DESCRIBE_GROUPS, LIST_GROUPS = 15, 16


def test_file_source_to_sink_pipeline(kcoord, names, tmp_path, java_classes):
    bootstrap = kcoord.bootstrap
    topic, group = names.topic(), names.group("connect")
    source_name, sink_name = names.group("src"), names.group("sink")
    create_topic(bootstrap, topic, 1)  # one partition: the sink sees the lines in order
    source, sink = tmp_path / "source.txt", tmp_path / "sink.txt"
    first = [f"first-{i}" for i in range(5)]
    source.write_text("".join(line + "\n" for line in first))

    worker = ConnectWorker(bootstrap, group, tmp_path / "connect").start()
    try:
        worker.put_connector(source_name, {"connector.class": SOURCE_CONNECTOR, "tasks.max": 1, "file": str(source),
                                           "topic": topic})
        worker.put_connector(sink_name, {"connector.class": SINK_CONNECTOR, "tasks.max": 1, "file": str(sink),
                                         "topics": topic})
        worker.wait_running(source_name)
        worker.wait_running(sink_name)
        wait_for_lines(sink, first, 60)

        later = [f"later-{i}" for i in range(5)]
        with source.open("a") as f:
            f.write("".join(line + "\n" for line in later))
        assert wait_for_lines(sink, later, 30) == first + later

        # The worker's group: classic, protocol type "connect", one member, STABLE, with the
        # Connect protocol the worker chose (4.x default "sessioned", KIP-507). Raw requests:
        # the admin clients decode member metadata as the consumer protocol's.
        [described] = call(bootstrap, DESCRIBE_GROUPS, 5, groups=(group,),
                           include_authorized_operations=False).groups
        assert (described.error_code, described.group_state, described.protocol_type, described.protocol_data) \
            == (0, "Stable", "connect", "sessioned")
        [member] = described.members
        assert member.client_id.startswith("connect-") and member.member_metadata and member.member_assignment
        listed = {g.group_id: g for g in call(bootstrap, LIST_GROUPS, 5, states_filter=(), types_filter=()).groups}
        assert (listed[group].protocol_type, listed[group].group_state, listed[group].group_type) == \
            ("connect", "Stable", "classic")

        # The sink task's consumer group ("connect-<connector>"): a classic consumer group
        # whose committed offset reaches the end of the topic once the worker flushes.
        sink_group = f"connect-{sink_name}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        d = admin.describe_consumer_groups([sink_group])[sink_group].result(timeout=10)
        assert (d.type, d.state, len(d.members)) == (ConsumerGroupType.CLASSIC, ConsumerGroupState.STABLE, 1)
        wait_until(lambda: committed_offsets(bootstrap, sink_group, topic, 1) == {0: len(first + later)}, 20,
                   message=lambda: f"sink offsets {committed_offsets(bootstrap, sink_group, topic, 1)}")
    finally:
        rc = worker.stop()
    assert rc in (0, 143), f"worker exit code {rc}:\n{worker.stderr_text()[-3000:]}"
    # A clean stop leaves the group (LeaveGroup), so it is empty at once, not after a session.
    [after] = call(bootstrap, DESCRIBE_GROUPS, 5, groups=(group,), include_authorized_operations=False).groups
    assert (after.group_state, after.members) == ("Empty", ())
