"""What configs/ adds to the shard (group_types.Contribution): the replay rule of the
group-config record (type 1200), the two operations on it, and the store every shard keeps
(`shard.group_configs`, also handed to the shard's replayer for the replay rule). No group
class: configs outlive the groups they name.
"""
from __future__ import annotations

from typing import Any

from records.group_config_records import GroupConfigKey

from ..group_types import Contribution
from .ops import alter_group_configs, read_group_configs, replay_group_config
from .store import GroupConfigStore


def _attach(shard: Any) -> None:
    store = GroupConfigStore(shard.config)
    shard.group_configs = store
    # The replay rule's only way to the store: rules get the replayer (group_types.ReplayRule).
    shard._replayer.group_configs = store


CONTRIBUTION = Contribution(
    name="configs",
    replay_rules={GroupConfigKey: replay_group_config},
    operations=(("read_group_configs", None, read_group_configs),
                ("alter_group_configs", None, alter_group_configs)),
    attach=_attach,
)
