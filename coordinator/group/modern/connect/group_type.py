"""The `connect` group type in the group-type registry (group_types.py).

What the shared group APIs see of a connect group (docs/design/connect-groups-spec.md §2):
- ListGroups: group type "connect", protocol type "connect", the consumer-group states;
- DescribeGroups answers it as Kafka answers it for a consumer group (Dead, and
  GROUP_ID_NOT_FOUND from v6): group_admin.describe_group only describes classic groups;
- DeleteGroups: refused with NON_EMPTY_GROUP while workers remain, else every record of
  the group is tombstoned; an empty group expires at the next retention check (C8);
- offsets: workers never commit in their group (Connect's source offsets live in a topic),
  so OffsetCommit answers GROUP_ID_NOT_FOUND, as Kafka answers a commit to a group of a
  type that does not take commits (C7); OffsetFetch and OffsetDelete by an admin (no
  member) are allowed, so tools can clean up offsets written before a conversion.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from ...errors import ApiError
from ...group_types import BaseTime, PartitionCheck, commit_time
from .group import ConnectGroup
from .record_helpers import group_tombstones

if TYPE_CHECKING:
    from records import CoordinatorRecord

    from ...image import MetadataImage
    from ...result import TimerOp


def _not_found(group: ConnectGroup) -> ApiError:
    return ApiError(ErrorCode.group_id_not_found,
                    f"Group {group.group_id} is a connect group; its workers do not commit offsets in it.")


class ConnectGroupType:
    name = "connect"

    def state(self, group: ConnectGroup) -> str:
        return group.state.value

    def protocol_type(self, group: ConnectGroup) -> str:
        return "connect"

    def subscribed_topics(self, group: ConnectGroup) -> set[str]:
        return set()

    def tombstones(self, group: ConnectGroup) -> list[CoordinatorRecord]:
        return group_tombstones(group)

    def delete_error(self, group: ConnectGroup) -> ErrorCode | None:
        return None if group.is_empty() else ErrorCode.non_empty_group

    def offset_expiration_base(self, group: ConnectGroup) -> BaseTime | None:
        return commit_time

    def metadata_expires(self, group: ConnectGroup) -> bool:
        return group.is_empty()

    def validate_offset_fetch(self, group: ConnectGroup, member_id: str | None, member_epoch: int) -> None:
        if member_id or member_epoch >= 0:
            raise _not_found(group)

    def offset_delete_error(self, group: ConnectGroup) -> ErrorCode | None:
        return None

    def validate_offset_commit(self, group: ConnectGroup, image: MetadataImage, member_id: str,
                               instance_id: str | None, generation: int, api_version: int,
                               transactional: bool = False) -> PartitionCheck:
        raise _not_found(group)

    def offset_commit_timers(self, group: ConnectGroup, member_id: str, now_ms: int) -> list[TimerOp]:
        return []
