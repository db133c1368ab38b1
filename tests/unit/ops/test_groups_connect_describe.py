"""`kcoord groups describe` on a connect group (seed 001): GroupAdmin asks ConsumerGroupDescribe,
then ConnectGroupDescribe (32706) only where ApiVersions lists it, and shows each worker's
connectors and tasks. The fake broker answers from the connect core's own describe, through
the wire codec both ways, so what is tested is what a real kcoord sends."""
from __future__ import annotations

import argparse
import asyncio
import json

from kio.schema.api_versions.v3 import response as av_resp
from kio.schema.consumer_group_describe.v0 import response as cgd_resp
from kio.schema.describe_groups.v5 import response as dg_resp
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3 import response as fc_resp
from kio.static.primitive import i16, i32, i32Timedelta

from coordinator.group.modern.connect import admin as connect_admin
from coordinator.protocol import connect_messages as cm
from coordinator.protocol.codec import decode_body, encode_body
from ops import groups_cli
from ops.groups_admin import GroupAdmin, connect_units
from tests.unit.connect.driver import ConnectContext

from .test_ops_connect import W, running_group

_ZERO = i32Timedelta.parse(__import__("datetime").timedelta(0))


class FakeBroker(GroupAdmin):
    """A GroupAdmin whose requests are answered in-process; `connect_api` says whether its
    ApiVersions lists 32706 (kcoord) or not (Apache Kafka)."""

    def __init__(self, c: ConnectContext, connect_api: bool = True) -> None:
        super().__init__("localhost:9092")
        self.c, self.connect_api, self.asked = c, connect_api, []

    async def _ask(self, request, address=None):
        name = type(request).__name__
        self.asked.append(name)
        # Every request crosses the wire codec: the admin must build encodable requests.
        request = decode_body(type(request), encode_body(request), 0)
        if name == "FindCoordinatorRequest":
            return fc_resp.FindCoordinatorResponse(throttle_time=_ZERO, error_code=ErrorCode.none, error_message=None,
                                                   node_id=fc_resp.BrokerId(0), host="localhost", port=i32(9092))
        if name == "ApiVersionsRequest":
            keys = [av_resp.ApiVersion(api_key=i16(k), min_version=i16(0), max_version=i16(0))
                    for k in (18, 69) + ((cm.CONNECT_GROUP_DESCRIBE,) if self.connect_api else ())]
            return av_resp.ApiVersionsResponse(error_code=ErrorCode.none, api_keys=tuple(keys), throttle_time=_ZERO)
        if name == "ConsumerGroupDescribeRequest":
            g = cgd_resp.DescribedGroup(error_code=ErrorCode.group_id_not_found, error_message=None,
                                        group_id=request.group_ids[0], group_state="", group_epoch=i32(0),
                                        assignment_epoch=i32(0), assignor_name="", members=(),
                                        authorized_operations=i32(-2147483648))
            return cgd_resp.ConsumerGroupDescribeResponse(throttle_time=_ZERO, groups=(g,))
        if name == "ConnectGroupDescribeRequest":
            resp = connect_admin.describe(self.c.shard, self.c.ctx(0), request, self.c.now_ms).response
            return decode_body(type(resp), encode_body(resp), 0)
        if name == "DescribeGroupsRequest":
            g = dg_resp.DescribedGroup(error_code=ErrorCode.none, group_id=request.groups[0], group_state="Dead",
                                       protocol_type="", protocol_data="", members=(),
                                       authorized_operations=i32(-2147483648))
            return dg_resp.DescribeGroupsResponse(throttle_time=_ZERO, groups=(g,))
        raise AssertionError(f"unexpected request {name}")


def test_describe_shows_a_connect_groups_workers_connectors_and_tasks():
    admin = FakeBroker(running_group())
    d = asyncio.run(admin.describe(W))
    assert (d.type, d.protocol_type, d.coordinator) == ("connect", "connect", (0, "localhost", 9092))
    (m,) = d.members
    assert m.member_id == "W1" and m.assignment == {"A": [-1, 0]} and m.target == {"A": [-1, 0]}
    assert m.state == "STABLE" and m.member_epoch == d.assignment_epoch
    assert admin.asked == ["FindCoordinatorRequest", "ConsumerGroupDescribeRequest", "ApiVersionsRequest",
                           "ConnectGroupDescribeRequest"]


def test_a_broker_without_32706_is_never_sent_it():
    # Apache Kafka closes the connection on an unknown API key: the admin must not try it.
    admin = FakeBroker(running_group(), connect_api=False)
    d = asyncio.run(admin.describe(W))
    assert d.type == "classic" and d.state == "Dead"
    assert "ConnectGroupDescribeRequest" not in admin.asked


def test_a_group_that_is_not_a_connect_group_falls_back_to_describe_groups():
    admin = FakeBroker(ConnectContext())
    d = asyncio.run(admin.describe("nobody"))
    assert d.type == "classic" and admin.asked[-1] == "DescribeGroupsRequest"


def test_connect_units_put_the_connector_first_as_task_minus_one():
    cat = cm.ConnectorsAndTasks(connectors=("B",), tasks=(cm.ConnectorTaskId(connector="A", task=1),
                                                           cm.ConnectorTaskId(connector="B", task=0)))
    assert connect_units(cat) == {"B": [-1, 0], "A": [1]}


def _cli(admin: GroupAdmin, capsys, **flags) -> str:
    args = argparse.Namespace(group=[W], all_groups=False, state=False, members=False, json=False, **flags)
    assert asyncio.run(groups_cli._describe(admin, args)) == 0
    return capsys.readouterr().out


def test_the_cli_table_lists_workers_with_connectors_and_tasks(capsys):
    out = _cli(FakeBroker(running_group()), capsys)
    header, row = out.strip().splitlines()
    assert header.split()[:2] == ["GROUP", "WORKER-ID"] and "TOPIC" not in header
    assert row.split()[:2] == [W, "W1"] and " A " in f" {row} " and "A/0" in row


def test_the_cli_json_has_one_row_per_worker(capsys):
    args = argparse.Namespace(group=[W], all_groups=False, state=False, members=True, json=True)
    assert asyncio.run(groups_cli._describe(FakeBroker(running_group()), args)) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows == [{"group": W, "worker_id": "W1", "group_instance_id": None, "host": rows[0]["host"],
                     "client_id": rows[0]["client_id"], "member_epoch": rows[0]["member_epoch"], "state": "STABLE",
                     "connectors": "A", "tasks": "A/0", "target_connectors": "A", "target_tasks": "A/0"}]
