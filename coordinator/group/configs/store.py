"""The per-group configs a shard holds: group id -> the keys set on it, as text.

Rules of this module:
- Changed only by replay of the group-config record (ops.py `replay_group_config`); a
  tombstone empties a group's set. Nothing else (DeleteGroups, offset expiry, a group's
  conversion) touches it: Kafka keeps group configs in the cluster metadata, independent
  of the group's lifecycle.
- The running groups ask `value(group_id, name, default)`: the parsed value set on the group,
  else the default they pass (the broker's); the heartbeat asks `overrides(group_id)` once
  (the group's parsed keys, or None). Parsed values are kept beside the text so a heartbeat
  pays one dict look-up; a value stored by another version that no longer parses falls back
  to the default.
- A stored value outside the broker's bounds of now (set under other bounds, before a
  restart with a new configuration) is used clamped to them, with a warning, as Kafka 4.4's
  `GroupConfig.evaluate` does; describe still shows what was set.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ...config import CoordinatorConfig
from ..errors import ApiError
from .keys import KEYS, parse

log = logging.getLogger("kcoord.group_configs")


class GroupConfigStore:
    __slots__ = ("_text", "_parsed", "_config", "overrides")

    def __init__(self, config: CoordinatorConfig | None = None) -> None:
        self._text: dict[str, dict[str, str]] = {}
        self._parsed: dict[str, dict[str, Any]] = {}
        self._config = config or CoordinatorConfig()
        # group id -> its parsed keys, or None: the heartbeat's one look-up (a bound dict.get,
        # no Python frame; `_parsed` is only ever changed in place)
        self.overrides = self._parsed.get

    def replace(self, group_id: str, configs: Mapping[str, str]) -> None:
        if not configs:
            self._text.pop(group_id, None)
            self._parsed.pop(group_id, None)
            return
        self._text[group_id] = dict(configs)
        parsed: dict[str, Any] = {}
        for name, text in configs.items():
            key = KEYS.get(name)
            if key is None:
                continue
            try:
                value = parse(key, text)
            except ApiError as e:
                log.warning("the group config %r for group %r is not used (%s): the default applies", name,
                            group_id, e.message)
                continue
            if key.bounds is not None:
                lo, hi = key.bounds(self._config)
                if not lo <= value <= hi:
                    clamped = min(max(value, lo), hi)
                    log.warning("the group config %r for group %r has value %d outside the broker's bounds "
                                "[%d, %d]: the effective value is %d", name, group_id, value, lo, hi, clamped)
                    value = clamped
            parsed[name] = value
        self._parsed[group_id] = parsed

    def configs(self, group_id: str) -> dict[str, str]:
        """The keys set on the group (a copy)."""
        return dict(self._text.get(group_id, ()))

    def groups(self) -> list[str]:
        """Every group with at least one key set (ListConfigResources)."""
        return list(self._text)

    def value(self, group_id: str, name: str, default: Any) -> Any:
        parsed = self._parsed.get(group_id)
        if parsed is None:
            return default
        return parsed.get(name, default)
