"""`kcoord groups` on a streams group: GroupAdmin asks StreamsGroupDescribe (v1) where
ApiVersions lists it, and the CLI shows the members' processes, endpoints and tasks, the
topology epoch, and deletes the internal topics only when asked. The fake broker answers
StreamsGroupDescribe from the streams core's own describe, through the wire codec both ways."""
from __future__ import annotations

import argparse
import asyncio
import json

from kio.schema.api_versions.v3 import response as av_resp
from kio.schema.delete_topics.v4 import response as dt_resp
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v7 import response as md_resp
from kio.static.primitive import i16, i32

from coordinator.group.context import RequestContext
from coordinator.group.streams import contribution
from coordinator.protocol.api_keys import STREAMS_GROUP_DESCRIBE
from coordinator.protocol.codec import decode_body, encode_body
from ops import groups_cli
from tests.unit.group.streams.driver import Driver, beat, image, subtopology, topology
from tests.unit.group.streams.test_heartbeat import App

from .test_groups_connect_describe import _ZERO
from .test_groups_connect_describe import FakeBroker as ConnectFake

TOP = topology(subtopology("0", sources=["input"], sinks=["app-rep"]),
               subtopology("1", repartition=["app-rep"], changelogs=["app-store-changelog"]))


def running_streams_group() -> Driver:
    d = Driver(image(input=6, **{"app-rep": 6, "app-store-changelog": 6}), streams_initial_rebalance_delay_ms=0,
               streams_assignment_interval_ms=0)
    app = App(d)
    app.join("m1", "p1", TOP)
    app.settle()
    return d


class FakeBroker(ConnectFake):
    """The connect test's fake broker (FindCoordinator, ConsumerGroupDescribe: not found), with a
    streams coordinator's ApiVersions (89 up to v1, unless `streams_api` is false), its
    StreamsGroupDescribe and DeleteGroups, and Metadata/DeleteTopics for the internal topics."""

    def __init__(self, d, streams_api: bool = True) -> None:
        super().__init__(None, connect_api=False)
        self.d, self.streams_api = d, streams_api
        self.deleted_topics: list[str] = []

    async def _ask(self, request, address=None):
        name = type(request).__name__
        if name in ("FindCoordinatorRequest", "ConsumerGroupDescribeRequest"):
            return await super()._ask(request, address)
        self.asked.append(name)
        request = decode_body(type(request), encode_body(request), 0)
        if name == "ApiVersionsRequest":
            keys = [av_resp.ApiVersion(api_key=i16(k), min_version=i16(0), max_version=i16(v))
                    for k, v in ((18, 3), (69, 0)) + (((STREAMS_GROUP_DESCRIBE, 1),) if self.streams_api else ())]
            return av_resp.ApiVersionsResponse(error_code=ErrorCode.none, api_keys=tuple(keys), throttle_time=_ZERO)
        if name == "StreamsGroupDescribeRequest":
            ctx = RequestContext(api_version=request.__version__, client_id="admin", client_host="/127.0.0.1")
            resp = getattr(self.d.shard, contribution.DESCRIBE)(ctx, request, self.d.now_ms).response
            return decode_body(type(resp), encode_body(resp), 0)
        if name == "DeleteGroupsRequest":
            result = self.d.apply(self.d.shard.delete_groups(RequestContext(api_version=2, client_id="admin",
                                                                            client_host="/127.0.0.1"),
                                                             request, self.d.now_ms)).response
            return decode_body(type(result), encode_body(result), 0)
        if name == "MetadataRequest":
            known = {"app-rep", "app-store-changelog", "input"} - set(self.deleted_topics)
            return md_resp.MetadataResponse(throttle_time=_ZERO, brokers=(), cluster_id=None, controller_id=i32(0),
                                            topics=tuple(md_resp.MetadataResponseTopic(
                                                error_code=ErrorCode.none if t.name in known
                                                else ErrorCode.unknown_topic_or_partition,
                                                name=t.name, is_internal=False, partitions=())
                                                for t in request.topics))
        if name == "DeleteTopicsRequest":
            self.deleted_topics += [str(t) for t in request.topic_names]
            return dt_resp.DeleteTopicsResponse(throttle_time=_ZERO, responses=tuple(
                dt_resp.DeletableTopicResult(name=t, error_code=ErrorCode.none) for t in request.topic_names))
        raise AssertionError(f"unexpected request {name}")


def test_describe_reads_a_streams_group_where_the_broker_lists_the_api():
    admin = FakeBroker(running_streams_group())
    d = asyncio.run(admin.describe("app"))
    assert (d.type, d.state, d.protocol, d.coordinator) == ("streams", "Stable", "sticky", (0, "localhost", 9092))
    assert d.topology is not None and d.topology.epoch == 1
    assert d.topology.internal_topics() == ["app-rep", "app-store-changelog"]
    (m,) = d.members
    assert m.streams is not None and m.streams.process_id == "p1"
    # the active tasks 0_p and 1_p read input-p and app-rep-p
    assert m.assignment == {"app-rep": list(range(6)), "input": list(range(6))}
    assert m.streams.tasks["active"] == {"0": list(range(6)), "1": list(range(6))}
    assert admin.asked == ["FindCoordinatorRequest", "ConsumerGroupDescribeRequest", "ApiVersionsRequest",
                           "StreamsGroupDescribeRequest"]


def test_a_broker_without_the_streams_api_is_never_sent_it():
    admin = FakeBroker(running_streams_group(), streams_api=False)
    admin.asked = []
    try:
        asyncio.run(admin.describe("app"))
    except AssertionError as e:         # the fake has no DescribeGroups: the fallback after it
        assert "DescribeGroupsRequest" in str(e)
    assert "StreamsGroupDescribeRequest" not in admin.asked


def _args(**flags):
    base = dict(group=["app"], all_groups=False, state=False, members=False, json=True)
    return argparse.Namespace(**{**base, **flags})


def test_members_show_process_endpoint_and_tasks(capsys):
    assert asyncio.run(groups_cli._describe(FakeBroker(running_streams_group()), _args(members=True))) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert {k: row[k] for k in ("group", "member_id", "process_id", "topology_epoch", "active", "standby", "warmup",
                                "target_active")} == {
        "group": "app", "member_id": "m1", "process_id": "p1", "topology_epoch": 1,
        "active": "0:0,1,2,3,4,5;1:0,1,2,3,4,5", "standby": "-", "warmup": "-",
        "target_active": "0:0,1,2,3,4,5;1:0,1,2,3,4,5"}


def test_state_shows_the_topology_epoch(capsys):
    assert asyncio.run(groups_cli._describe(FakeBroker(running_streams_group()), _args(state=True, json=False))) == 0
    header, row = capsys.readouterr().out.strip().splitlines()
    assert "TOPOLOGY-EPOCH" in header.split() and row.split()[3:5] == ["streams", "sticky"]
    assert row.split()[-2:] == ["1", "1"]      # topology epoch 1, one member


def test_delete_removes_the_internal_topics_only_when_asked(capsys):
    d = running_streams_group()
    admin = FakeBroker(d)
    assert asyncio.run(groups_cli._delete(admin, _args(delete_internal_topics=True))) == 1   # not empty
    assert admin.deleted_topics == [] and "app" in d.shard.groups
    capsys.readouterr()
    assert d.hb(beat("m1", -1)).error_code == ErrorCode.none
    assert asyncio.run(groups_cli._delete(admin, _args(delete_internal_topics=True))) == 0
    assert json.loads(capsys.readouterr().out) == [
        {"group": "app", "status": "Successful"}, {"internal_topic": "app-rep", "status": "Deleted"},
        {"internal_topic": "app-store-changelog", "status": "Deleted"}]
    assert "app" not in d.shard.groups and admin.deleted_topics == ["app-rep", "app-store-changelog"]
