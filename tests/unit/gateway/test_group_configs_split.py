"""The gateway's split of the config APIs (coordinator/gateway/group_configs.py): GROUP
resources taken out, the answers joined in the request's order, ListConfigResources' GROUP
entries replaced, and JoinedPending filled whichever part comes last."""
from __future__ import annotations

import asyncio
from datetime import timedelta

from kio.schema.errors import ErrorCode

from coordinator.gateway import group_configs as gc
from coordinator.group.kio_util import schema
from coordinator.protocol.codec import decode_response_frame, encode_response_frame

GROUP, TOPIC, BROKER = 32, 2, 4


def alter_request(*resources):
    mod = schema("incremental_alter_configs", 1, "request")
    return mod.IncrementalAlterConfigsRequest(validate_only=False, resources=tuple(
        mod.AlterConfigsResource(resource_type=t, resource_name=n, configs=()) for t, n in resources))


def alter_response(*entries):
    mod = schema("incremental_alter_configs", 1, "response")
    return mod.IncrementalAlterConfigsResponse(throttle_time=timedelta(0), responses=tuple(
        mod.AlterConfigsResourceResponse(error_code=ErrorCode(code), error_message=None, resource_type=t,
                                         resource_name=n)
        for t, n, code in entries))


def test_split_and_join_keep_the_requests_order():
    request = alter_request((TOPIC, "t1"), (GROUP, "g1"), (BROKER, "1"), (GROUP, "g2"))
    assert gc.takes(44, 1, request) and not gc.takes(44, 1, alter_request((TOPIC, "t1")))
    groups, rest = gc.split(44, request)
    assert [r.resource_name for r in groups.resources] == ["g1", "g2"]
    assert [r.resource_name for r in rest.resources] == ["t1", "1"]
    assert gc.split(44, alter_request((GROUP, "g")))[1] is None
    upstream = alter_response((BROKER, "1", 0), (TOPIC, "t1", 3))      # Kafka's own order
    local = alter_response((GROUP, "g1", 0), (GROUP, "g2", 40))
    joined = gc.join(44, 1, request, local, upstream)
    assert [(r.resource_name, int(r.error_code)) for r in joined.responses] == [
        ("t1", 3), ("g1", 0), ("1", 0), ("g2", 40)]


def test_list_config_resources_groups_are_kcoords():
    mod = schema("list_config_resources", 1, "request")
    assert gc.takes(74, 1, mod.ListConfigResourcesRequest(resource_types=()))
    assert not gc.takes(74, 1, mod.ListConfigResourcesRequest(resource_types=(TOPIC,)))
    groups, rest = gc.split(74, mod.ListConfigResourcesRequest(resource_types=(TOPIC, GROUP)))
    assert groups.resource_types == (GROUP,) and rest.resource_types == (TOPIC,)
    assert gc.split(74, mod.ListConfigResourcesRequest(resource_types=(GROUP,)))[1] is None
    r = schema("list_config_resources", 1, "response")
    upstream = r.ListConfigResourcesResponse(throttle_time=timedelta(0), error_code=ErrorCode.none, config_resources=(
        r.ConfigResource(resource_name="t", resource_type=TOPIC), r.ConfigResource(resource_name="kafkas", resource_type=GROUP)))
    local = r.ListConfigResourcesResponse(throttle_time=timedelta(0), error_code=ErrorCode.none, config_resources=(
        r.ConfigResource(resource_name="ours", resource_type=GROUP),))
    joined = gc.join(74, 1, None, local, upstream)
    assert [(c.resource_name, int(c.resource_type)) for c in joined.config_resources] == [("t", TOPIC), ("ours", GROUP)]


class FakeClient:
    def __init__(self) -> None:
        self.held = 0
        self.closed = False
        self.loop = asyncio.new_event_loop()

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def frame_of(response) -> bytes:
    return encode_response_frame(44, 1, 7, response)


def test_joined_pending_is_filled_whichever_part_comes_last():
    request = alter_request((TOPIC, "t1"), (GROUP, "g1"))
    upstream, local = alter_response((TOPIC, "t1", 0)), alter_response((GROUP, "g1", 0))

    def finish(frame: bytes, ours) -> bytes:
        cid, theirs = decode_response_frame(44, 1, frame)
        return encode_response_frame(44, 1, cid, gc.join(44, 1, request, ours, theirs))

    for local_first in (True, False):
        client = FakeClient()
        pending = gc.JoinedPending(7, None, 10, client, finish)
        assert pending.data is None
        if local_first:
            pending.local_done(local)
            assert pending.data is None
            pending.data = frame_of(upstream)       # what the link does (forward.py)
        else:
            pending.data = frame_of(upstream)
            assert pending.data is None
            pending.local_done(local)
        joined = pending.data
        assert joined is not None
        assert [r.resource_name for r in decode_response_frame(44, 1, joined)[1].responses] == ["t1", "g1"]
        assert client.held == len(joined) - len(frame_of(upstream))
        client.loop.close()
