"""What offsets/ adds to the shard (group_types.Contribution): OffsetCommit, OffsetFetch and
OffsetDelete (ops.py), the retention check and the clean-up after topics are deleted
upstream (expiration.py), and the first retention check a loaded shard arms. Offsets have no
group type of their own: a commit to an unknown group creates the registry's simple group.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..group_types import Contribution
from ..result import Result, ScheduleTimer, TimerOp
from ..timers import EXPIRE_KEY, TimerKind
from . import expiration, ops
from .requests import OffsetDelete, OffsetFetch, offset_commit_shape

if TYPE_CHECKING:
    from ..context import OffsetsView


def _on_expire(shard: OffsetsView, key: tuple, payload: Any, now_ms: int) -> Result:
    return expiration.cleanup(shard, now_ms)


def _on_topics_deleted(shard: OffsetsView, key: tuple, payload: Any, now_ms: int) -> Result:
    return expiration.topics_deleted(shard, payload)


def on_loaded(shard: OffsetsView, now_ms: int) -> list[TimerOp]:
    return [ScheduleTimer(EXPIRE_KEY, now_ms + shard.config.offsets_retention_check_interval_ms)]


CONTRIBUTION = Contribution(
    name="offsets",
    operations=(("offset_commit", None, ops.offset_commit),
                ("offset_fetch", None, ops.offset_fetch),
                ("offset_delete", None, ops.offset_delete)),
    request_shapes={"offset_commit": offset_commit_shape, "offset_fetch": OffsetFetch, "offset_delete": OffsetDelete},
    timers={TimerKind.EXPIRE.value: _on_expire,
            TimerKind.TOPICS_DELETED.value: _on_topics_deleted},
    on_loaded=on_loaded,
)
