"""The downgrade check on per-group configuration (record type 1200, kcoord-private,
docs/user/group-configs.md): Kafka never reads it, so each group with a live config record is
reported as losing it, with its keys and the kafka-configs command to set them again; a
group whose set was emptied (tombstone) is not."""
from __future__ import annotations

from records import CoordinatorRecord
from records.group_config_records import GroupConfigEntry, GroupConfigKey, GroupConfigValue

from .logs import LogBuilder, commit
from .test_ops_downgrade import run_check


def configs(group: str, *keys: str) -> CoordinatorRecord:
    return CoordinatorRecord(GroupConfigKey(group), GroupConfigValue(tuple(
        GroupConfigEntry(k, "60000") for k in keys)), 0)


def test_groups_with_config_records_are_reported_with_the_keys_to_set_again():
    log = LogBuilder().write(commit("orders", "t", 0, 5), configs("orders", "consumer.session.timeout.ms"),
                             configs("tuned", "consumer.session.timeout.ms"),
                             configs("tuned", "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
                             configs("emptied", "consumer.session.timeout.ms"),
                             CoordinatorRecord(GroupConfigKey("emptied"), None, 0))
    report, _, _ = run_check(log.log_batches())
    assert report["group_configs"] == [
        {"group": "orders", "keys": ["consumer.session.timeout.ms"]},
        {"group": "tuned", "keys": ["consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"]}]
    assert report["groups_losing_state"] == ["orders", "tuned"]
    assert report["verdict"] == "state would be lost"
    groups = {g["group"]: g for g in report["groups"]}
    (why,) = [r for r in groups["tuned"]["reasons"] if "1200" in r]
    assert "never reads" in why and "consumer.heartbeat.interval.ms" in why
    assert "kafka-configs" in why and "--entity-name tuned" in why
    assert not groups["emptied"]["would_lose_state"]
    assert groups["emptied"]["new_protocol_records"] == {"GROUP_CONFIG": 2}
    # The committed offsets are kept: only the configs are lost.
    assert report["offsets"]["missing"] == [] and report["offsets"]["compared"] == 1
