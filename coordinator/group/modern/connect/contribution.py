"""What modern/connect/ adds to the shard (group_types.Contribution): the connect group type
(docs/design/connect-groups.md), the replay rules of its records (types 1000-1004), the rows
of its four APIs, its timer kind, and what a loaded shard arms for its groups. It plugs in
through this one declaration, like any group type: nothing registers at import.
"""
from __future__ import annotations

from ...group_types import Contribution
from . import admin, assignment, heartbeat
from .group import ConnectGroup
from .group_type import ConnectGroupType
from .replay import REPLAY_RULES
from .timers import KIND

CONTRIBUTION = Contribution(
    name="connect",
    group_class=ConnectGroup,
    group_type=ConnectGroupType(),
    replay_rules=REPLAY_RULES,
    operations=(("connect_group_heartbeat", None, heartbeat.heartbeat),
                ("connect_group_prepare_assignment", None, assignment.prepare),
                ("connect_group_install_assignment", None, assignment.install),
                ("connect_group_describe", None, admin.describe)),
    timers={KIND: heartbeat.on_timer},
    on_loaded=heartbeat.on_loaded,
)
