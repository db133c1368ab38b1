"""ConsumerGroupHeartbeat v0-1 and 32700's variant reach the heartbeat in one shape
(coordinator/group/modern/consumer/requests.py): Kafka's default for a field the request's
class lacks, what the version changes as fields, and the answer in the version's classes."""
from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from kio.schema.consumer_group_heartbeat.v0 import request as v0
from kio.schema.consumer_group_heartbeat.v1 import request as v1
from kio.schema.errors import ErrorCode

from coordinator.group.kio_util import schema
from coordinator.group.modern.consumer.requests import ConsumerGroupHeartbeat, csa_heartbeat
from coordinator.group.shard import RequestContext
from coordinator.protocol.private_messages import ClientAssignor, CsaHeartbeatRequest

from .context import ShardContext, topic
from .test_consumer_heartbeat import fast

_JOIN = dict(group_id="g", member_id="m", member_epoch=0, instance_id=None, rack_id=None,
             rebalance_timeout=timedelta(seconds=30), subscribed_topic_names=("foo",), server_assignor=None,
             topic_partitions=())


def test_v0_has_no_regex_and_may_join_without_member_id():
    shape = ConsumerGroupHeartbeat(v0.ConsumerGroupHeartbeatRequest(**_JOIN))
    assert shape.subscribed_topic_regex is None and shape.client_assignors is None
    assert not shape.member_id_required
    assert shape.response_schema is schema("consumer_group_heartbeat", 0)


def test_v1_reads_the_regex_and_requires_a_member_id():
    shape = ConsumerGroupHeartbeat(v1.ConsumerGroupHeartbeatRequest(**_JOIN, subscribed_topic_regex="f.*"))
    assert shape.subscribed_topic_regex == "f.*" and shape.client_assignors is None
    assert shape.member_id_required
    assert shape.response_schema is schema("consumer_group_heartbeat", 1)
    assert shape.topic_partitions == () and shape.subscribed_topic_names == ("foo",)


def test_csa_carries_its_client_assignors():
    assignors = (ClientAssignor(name="a", minimum_version=0, maximum_version=1, version=1),)
    shape = csa_heartbeat(CsaHeartbeatRequest(**_JOIN, subscribed_topic_regex="f.*", client_assignors=assignors))
    assert shape.client_assignors == assignors and shape.subscribed_topic_regex == "f.*"
    assert shape.response_schema is schema("consumer_group_heartbeat", 0)   # 32700's own version


@pytest.mark.parametrize("version", [0, 1])
def test_the_answer_is_in_the_requests_version(version):
    c = ShardContext(topic("foo", 2), config=fast())
    cls = (v0 if version == 0 else v1).ConsumerGroupHeartbeatRequest
    ctx = RequestContext(api_version=version, client_id="client", client_host="/127.0.0.1")
    for member_id, code in (("m", ErrorCode.none), ("", ErrorCode.none if version == 0 else ErrorCode.invalid_request)):
        resp = c.apply(c.shard.consumer_group_heartbeat(ctx, cls(**{**_JOIN, "member_id": member_id}), c.now_ms)).response
        assert type(resp) is schema("consumer_group_heartbeat", version).ConsumerGroupHeartbeatResponse
        assert resp.error_code == code


def test_a_repeated_message_gets_the_same_shape_and_the_kept_shapes_are_bounded(monkeypatch):
    from coordinator.group.modern.consumer import requests

    monkeypatch.setattr(requests, "SHAPES_KEPT", 2)
    monkeypatch.setattr(requests, "_SHAPES", {})

    def message(epoch: int):
        return v1.ConsumerGroupHeartbeatRequest(
            group_id="g", member_id="m", member_epoch=epoch, instance_id=None, rack_id=None,
            rebalance_timeout=timedelta(milliseconds=-1), subscribed_topic_names=None,
            subscribed_topic_regex=None, server_assignor=None, topic_partitions=None)

    req = message(3)
    shape = ConsumerGroupHeartbeat(req)
    assert ConsumerGroupHeartbeat(req) is shape and (shape.member_id, shape.member_epoch) == ("m", 3)
    equal = ConsumerGroupHeartbeat(message(3))
    assert equal is not shape and equal.member_epoch == 3        # by identity, not by value
    for epoch in range(4, 9):
        assert ConsumerGroupHeartbeat(message(epoch)).member_epoch == epoch
        assert len(requests._SHAPES) <= 2
    requests._SHAPES.clear()
    join = dataclasses.replace(message(0), subscribed_topic_names=("foo",) * 1000,
                               rebalance_timeout=timedelta(seconds=30))
    long_ids = dataclasses.replace(message(3), member_id="m" * 600)
    assert ConsumerGroupHeartbeat(join).subscribed_topic_names == ("foo",) * 1000
    assert ConsumerGroupHeartbeat(long_ids).member_id == "m" * 600
    assert not requests._SHAPES, "only keep-alives with ids of a sane size are kept"


def test_only_a_keep_alive_has_the_steady_form():
    def shape(**fields):
        base = dict(group_id="g", member_id="m", member_epoch=3, instance_id=None, rack_id=None,
                    rebalance_timeout=timedelta(milliseconds=-1), subscribed_topic_names=None,
                    subscribed_topic_regex=None, server_assignor=None, topic_partitions=None)
        return ConsumerGroupHeartbeat(v1.ConsumerGroupHeartbeatRequest(**{**base, **fields}))

    assert shape().steady_form
    for changed in ({"member_epoch": 0}, {"member_epoch": -1}, {"instance_id": "i"}, {"rack_id": "r"},
                    {"rebalance_timeout": timedelta(seconds=30)}, {"subscribed_topic_names": ("foo",)},
                    {"subscribed_topic_regex": "f.*"}, {"server_assignor": "uniform"}, {"topic_partitions": ()}):
        assert not shape(**changed).steady_form, changed
