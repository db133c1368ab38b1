"""DeleteGroups v3 (KIP-1331, Kafka 4.4) on the sans-IO shard: the same deletions and codes as
v2, each result with the new ErrorMessage, which Kafka 4.4 leaves null in every case but a
failing streams topology-description plugin (GROUP_DELETION_FAILED), which kcoord does not
have. Kafka's shard answers its refusals by code alone (GroupCoordinatorShard.deleteGroups)."""
from __future__ import annotations

from kio.schema.errors import ErrorCode

from coordinator.protocol import error_responses
from coordinator.protocol.messages import schema

from .context import ShardContext, topic
from .test_consumer_heartbeat import fast
from .test_offsets_and_admin import commit

FOO = topic("foo", 4)


def delete(c: ShardContext, version: int, *groups: str) -> dict:
    mod = schema("delete_groups", version, "request")
    response = c.call("delete_groups", mod.DeleteGroupsRequest(groups_names=groups), version)
    assert type(response).__version__ == version
    return {r.group_id: (r.error_code, getattr(r, "error_message", "<absent>")) for r in response.results}


def test_v3_deletes_as_v2_does_and_every_error_message_is_null():
    c = ShardContext(FOO, config=fast())
    c.heartbeat("g", "m1", 0, topics=["foo"])                 # a consumer group with a member
    commit(c, "simple", "", -1, {"foo": {0: 1}})              # an empty classic group with offsets
    assert delete(c, 3, "g", "simple", "nope") == {
        "g": (ErrorCode.non_empty_group, None), "simple": (ErrorCode.none, None),
        "nope": (ErrorCode.group_id_not_found, None)}
    assert "simple" not in c.shard.groups and not c.shard.offsets.has_offsets("simple")
    assert delete(c, 3, "simple") == {"simple": (ErrorCode.group_id_not_found, None)}     # twice
    c.heartbeat("g", "m1", -1)
    assert delete(c, 3, "g") == {"g": (ErrorCode.none, None)}
    assert "g" not in c.reload().groups                       # the tombstones replay cleanly


def test_v2_has_no_message_field_and_answers_the_same_codes():
    c = ShardContext(FOO, config=fast())
    commit(c, "simple", "", -1, {"foo": {0: 1}})
    assert delete(c, 2, "simple", "nope") == {"simple": (ErrorCode.none, "<absent>"),
                                              "nope": (ErrorCode.group_id_not_found, "<absent>")}


def test_the_error_response_and_refused_entries_at_v3_carry_a_null_message():
    req = schema("delete_groups", 3, "request").DeleteGroupsRequest(groups_names=("a", "b"))
    response = error_responses.delete_groups(3, _Error(ErrorCode.not_coordinator, "moved"), req)
    assert [(r.group_id, r.error_code, r.error_message) for r in response.results] == [
        ("a", ErrorCode.not_coordinator, None), ("b", ErrorCode.not_coordinator, None)]
    entry = error_responses.deletable_group_error(schema("delete_groups", 3), "c", ErrorCode.group_authorization_failed)
    assert (entry.error_code, entry.error_message) == (ErrorCode.group_authorization_failed, None)


class _Error:
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        self.code, self.message = code, message
