"""The group API versions Kafka 4.4 added, scripted with raw requests on Kafka 4.4 and on kcoord
in front of it, compared field by field:
- DeleteGroups v3 (KIP-1331): a group with a member, an empty group, an unknown group, one
  deleted twice; each result's ErrorMessage compared exactly (Kafka 4.4 without a topology
  plugin leaves it null);
- TxnOffsetCommit v6 (KIP-1319), inside one transaction of a raw transactions-v2 producer:
  a known topic id, an unknown one, a stale member epoch and an unknown group at v6 and at v5
  (v6 answers STALE_MEMBER_EPOCH / GROUP_ID_NOT_FOUND where v5 answers ILLEGAL_GENERATION),
  then the committed offsets read back by name;
- ApiVersions lists DeleteGroups 0-3 and TxnOffsetCommit 0-6 on both sides.
"""
from __future__ import annotations

import uuid
from typing import Any

import pytest

from coordinator.protocol.apis import request_class
from support.differential import (
    DELETE_GROUPS,
    Coordinator,
    RawMember,
    Transcript,
    assert_same,
    commit,
    fetch,
    member_ids,
    plain,
    prepare_group,
)
from support.raw_transactions import TXN_OFFSET_COMMIT, RawProducer, txn_commit
from support.wait import wait_until

API_VERSIONS = 18
PARTITIONS = 6


def _generated_versions_decoded() -> bool:
    try:
        request_class(DELETE_GROUPS, 3), request_class(TXN_OFFSET_COMMIT, 6)
    except KeyError:
        return False
    return True


pytestmark = pytest.mark.skipif(
    not _generated_versions_decoded(),
    reason="kcoord's protocol layer (coordinator/protocol/apis.py) does not decode the versions generated "
           "from Kafka 4.4 yet (DeleteGroups v3, TxnOffsetCommit v6)")


def test_api_versions_list_delete_groups_v3_and_txn_offset_commit_v6(sides):
    listed = []
    for side in sides:
        versions = {a.api_key: (a.min_version, a.max_version)
                    for a in side.call(API_VERSIONS, 3, client_software_name="kcoord-diff",
                                       client_software_version="1").api_keys}
        listed.append({k: versions.get(k) for k in (DELETE_GROUPS, TXN_OFFSET_COMMIT)})
    assert listed[0] == listed[1] == {DELETE_GROUPS: (0, 3), TXN_OFFSET_COMMIT: (0, 6)}, listed


# ------------------------------------------------------------------------ DeleteGroups v3
def delete_v3(side: Coordinator, *groups: str) -> list[tuple[str, str, str | None]]:
    """(group, error, error message) per result, by group: the message compared exactly."""
    response = side.call(DELETE_GROUPS, 3, groups_names=groups)
    return sorted((r.group_id, plain(r.error_code), r.error_message) for r in response.results)


def delete_groups_v3(t: Transcript, groups: dict[str, str], topic: str, member: str) -> Transcript:
    side = t.side
    prepare_group(side, groups["consumer"])
    a = RawMember(side, groups["consumer"], member, topics=(topic,))
    a.heartbeat_until(lambda r: a.owned_count() == PARTITIONS, message="6 partitions")
    commit(side, groups["simple"], topic, {0: 1})       # an empty classic group holding offsets
    t.add("a member, an empty group, an unknown group",
          delete_v3(side, groups["consumer"], groups["simple"], groups["unknown"]))
    a.leave()
    t.add("the consumer group once empty", delete_v3(side, groups["consumer"]))
    t.add("twice", delete_v3(side, groups["consumer"], groups["simple"]))
    return t


def test_delete_groups_v3(sides, names, topic):
    groups = {"consumer": names.group(), "simple": names.group(), "unknown": names.group()}
    [member] = member_ids(1)
    kafka, kcoord = (delete_groups_v3(Transcript(side), groups, topic, member) for side in sides)
    assert_same(kafka, kcoord)
    g = groups
    assert kafka["a member, an empty group, an unknown group"] == sorted([
        (g["consumer"], "non_empty_group", None), (g["simple"], "none", None),
        (g["unknown"], "group_id_not_found", None)])
    assert kafka["twice"] == sorted([(g["consumer"], "group_id_not_found", None),
                                     (g["simple"], "group_id_not_found", None)])


# --------------------------------------------------------------------- TxnOffsetCommit v6
def txn_offset_commit_v6(t: Transcript, group: str, unknown_group: str, topic: str, member: str,
                         transactional_id: str) -> Transcript:
    side = t.side
    prepare_group(side, group)
    a = RawMember(side, group, member, topics=(topic,))
    a.heartbeat_until(lambda r: a.owned_count() == PARTITIONS, message="6 partitions")
    [topic_id] = a.owned
    unknown_id = uuid.UUID(int=0x4b4c1319)
    aliases = {topic_id: "<the topic>", topic: "<the topic>", unknown_id: "<an unknown topic id>"}
    p = RawProducer(side, f"{transactional_id}-{side.name}")
    p.init()
    t.add("v6 by a known id at the member epoch",
          txn_commit(p, 6, group, {topic_id: {0: 5, 1: 6}}, epoch=a.epoch, member=member, aliases=aliases))
    t.add("v6 by an unknown id",
          txn_commit(p, 6, group, {unknown_id: {0: 1}}, epoch=a.epoch, member=member, aliases=aliases))
    t.add("v6 at a newer member epoch",
          txn_commit(p, 6, group, {topic_id: {2: 1}}, epoch=a.epoch + 1, member=member, aliases=aliases))
    t.add("v5 at a newer member epoch",
          txn_commit(p, 5, group, {topic: {2: 1}}, epoch=a.epoch + 1, member=member, aliases=aliases))
    t.add("v6 to an unknown group with a generation",
          txn_commit(p, 6, unknown_group, {topic_id: {0: 1}}, epoch=3, member="m", aliases=aliases))
    t.add("v5 to an unknown group with a generation",
          txn_commit(p, 5, unknown_group, {topic: {0: 1}}, epoch=3, member="m", aliases=aliases))
    t.add("commit the transaction", p.end(committed=True))

    def stable() -> Any:
        out = fetch(side, group, topic)
        codes = {q["error_code"] for x in out["topics"] for q in x["partitions"]}
        return out if "unstable_offset_commit" not in codes else None
    t.add("fetch by name once committed", wait_until(stable, 30, 0.1, lambda: f"{side.name}: stable offsets"))
    a.leave()
    return t


def test_txn_offset_commit_v6(sides, names, topic):
    group, unknown_group = names.group(), names.group()
    [member] = member_ids(1)
    transactional_id = f"diff-txn-{uuid.uuid4().hex[:12]}"
    kafka, kcoord = (txn_offset_commit_v6(Transcript(side), group, unknown_group, topic, member, transactional_id)
                     for side in sides)
    assert_same(kafka, kcoord)
    assert kafka["v6 by a known id at the member epoch"] == {"<the topic>": {0: "none", 1: "none"}}
    assert kafka["v6 by an unknown id"] == {"<an unknown topic id>": {0: "unknown_topic_id"}}
    assert kafka["v6 at a newer member epoch"] == {"<the topic>": {2: "stale_member_epoch"}}
    assert kafka["v5 at a newer member epoch"] == {"<the topic>": {2: "illegal_generation"}}
    assert kafka["v6 to an unknown group with a generation"] == {"<the topic>": {0: "group_id_not_found"}}
    assert kafka["v5 to an unknown group with a generation"] == {"<the topic>": {0: "illegal_generation"}}
    committed = {q["partition_index"]: q["committed_offset"]
                 for x in kafka["fetch by name once committed"]["topics"] for q in x["partitions"]}
    assert (committed[0], committed[1], committed[2]) == (5, 6, -1)
