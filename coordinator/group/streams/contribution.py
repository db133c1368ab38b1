"""What the streams group type hands the core (group_types.Contribution): its group class and
`GroupType`, the replay rules of records 17 and 19-23, its heartbeat and describe rows, its timer kind and
its soft state on the shard.

The rows are shard operations only: no API row serves it yet (protocol/api_table.py), so no
client reaches it until the streams APIs are advertised (docs/design/streams-groups.md).
"""
from __future__ import annotations

from typing import Any

from ..group_types import Contribution
from .describe import streams_group_describe
from .group_type import StreamsGroupType
from .heartbeat import streams_group_heartbeat
from .membership import KIND
from .model import StreamsGroup
from .replay import RULES
from .timers import on_loaded, on_timer

OPERATION = "streams_group_heartbeat"
DESCRIBE = "streams_group_describe"


def attach(shard: Any) -> None:
    """The groups' soft state (model.Soft), by group id."""
    shard.streams_soft = {}


CONTRIBUTION = Contribution(
    name="streams",
    group_class=StreamsGroup,
    group_type=StreamsGroupType(),
    replay_rules=RULES,
    operations=((OPERATION, None, streams_group_heartbeat),
                (OPERATION, StreamsGroup, streams_group_heartbeat),
                (DESCRIBE, None, streams_group_describe)),
    timers={KIND: on_timer},
    on_loaded=on_loaded,
    attach=attach,
)
