"""ConsumerGroupDescribe, DescribeGroups, ListGroups and DeleteGroups in one shape each,
whatever the version: the shard builds them at its door (the admin contribution's request
shapes, builtin.py), and the service builds the two it answers group by group on each
group's shard (DescribeGroups, ConsumerGroupDescribe: service/group_apis.py), so
group_admin.py reads fields, never versions.

Rules:
- the shape has the newest version's field names; a field an older version lacks gets what
  Kafka assumes for it (no authorized operations before DescribeGroups v3; no states filter
  before ListGroups v4, no types filter before v5: every group matches);
- what a version changes in the answer is a field too: `not_found_error` (DescribeGroups v6+,
  KIP-1043, answers a group it cannot describe GROUP_ID_NOT_FOUND with a message; v0-v5
  answer it Dead with no error), and `response_schema`, the version's response classes,
  which the handlers build with (kio_util.build keeps the fields the version has);
- the version is read once, from the request's kio class (`__version__`, the version it was
  decoded at), never probed field by field;
- no copy of what grows with the request: the group names and filters are kio's tuples, as
  sent; the admin APIs are not on a hot path, so one small object per request is fine.
"""
from __future__ import annotations

from types import ModuleType
from typing import Any

from ..protocol.messages import schema


class ConsumerGroupDescribe:
    __slots__ = ("group_ids", "include_authorized_operations", "response_schema")

    def __init__(self, req: Any) -> None:
        self.group_ids: tuple[str, ...] = req.group_ids
        self.include_authorized_operations: bool = req.include_authorized_operations
        self.response_schema: ModuleType = schema("consumer_group_describe", req.__version__)


class DescribeGroups:
    __slots__ = ("groups", "include_authorized_operations", "not_found_error", "response_schema")

    def __init__(self, req: Any) -> None:
        version = req.__version__
        self.groups: tuple[str, ...] = req.groups
        self.include_authorized_operations: bool = req.include_authorized_operations if version >= 3 else False
        self.not_found_error: bool = version >= 6
        self.response_schema: ModuleType = schema("describe_groups", version)


class ListGroups:
    __slots__ = ("states_filter", "types_filter", "response_schema")

    def __init__(self, req: Any) -> None:
        version = req.__version__
        self.states_filter: tuple[str, ...] = req.states_filter if version >= 4 else ()
        self.types_filter: tuple[str, ...] = req.types_filter if version >= 5 else ()
        self.response_schema: ModuleType = schema("list_groups", version)


class DeleteGroups:
    __slots__ = ("groups_names", "response_schema")

    def __init__(self, req: Any) -> None:
        self.groups_names: tuple[str, ...] = req.groups_names
        self.response_schema: ModuleType = schema("delete_groups", req.__version__)
