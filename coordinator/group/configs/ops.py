"""The shard's side of per-group configuration: the record's replay rule and the two
operations the service runs on the group's shard (coordinator/service/group_configs.py).

Rules of this module:
- `read_group_configs` answers the keys set on each named group (every group here belongs to
  this shard); the defaults, the sources and the filtering by name are the service's.
- `alter_group_configs` computes the group's new set as Kafka's controller does
  (`ConfigurationControlManager`: SET and DELETE for IncrementalAlterConfigs, APPEND and
  SUBTRACT refused on every group key;
  the whole set replaced for the legacy AlterConfigs), validates the whole new set
  (keys.validate: Kafka's `GroupConfig.validate`), and writes one record holding it, or its
  tombstone once it is empty. validate_only writes nothing. A refusal is the response
  (error code, message), never an exception: it is one resource of a request.
- The store changes only by replay (group/__init__.py, rule 2).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from records import CoordinatorRecord
from records.group_config_records import GroupConfigEntry, GroupConfigKey, GroupConfigValue

from ..errors import ApiError
from ..result import Result
from .keys import validate
from .store import GroupConfigStore

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3        # IncrementalAlterConfigs' ConfigOperation
_OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}
MAX_VALUE_BYTES = 0x7FFF                           # a compact string of the record


@dataclass(frozen=True, slots=True)
class ReadGroupConfigs:
    group_ids: tuple[str, ...]
    group_id: str = ""          # the operations table's row look-up: no group type owns configs


@dataclass(frozen=True, slots=True)
class AlterGroupConfigs:
    group_id: str
    # (name, operation, value); `incremental` False: the legacy AlterConfigs, operation ignored
    changes: tuple[tuple[str, int, str | None], ...]
    incremental: bool = True
    validate_only: bool = False


def store_of(view: Any) -> GroupConfigStore:
    return view.group_configs


def replay_group_config(replayer: Any, key: GroupConfigKey, value: GroupConfigValue | None,
                        offset: int, producer_id: int) -> None:
    configs = {} if value is None else {e.name: e.value for e in value.configs if e.value is not None}
    replayer.group_configs.replace(key.group_id, configs)


def read_group_configs(shard: Any, ctx: Any, req: ReadGroupConfigs, now_ms: int) -> Result:
    store = store_of(shard)
    return Result(response={g: store.configs(g) for g in req.group_ids})


def _changed(current: dict[str, str], req: AlterGroupConfigs) -> dict[str, str]:
    names = [name for name, _, _ in req.changes]
    if len(set(names)) != len(names):
        raise ApiError(ErrorCode.invalid_request, "Error due to duplicate config keys")
    for name, op, value in req.changes:
        if value is None and (op != DELETE or not req.incremental):
            raise ApiError(ErrorCode.invalid_request, f"Null value not supported for : {name}")
        if value is not None and len(value.encode()) > MAX_VALUE_BYTES:
            raise ApiError(ErrorCode.invalid_config, f"The value of {name} is longer than {MAX_VALUE_BYTES} bytes")
    if not req.incremental:
        return {name: value for name, _, value in req.changes if value is not None}
    new = dict(current)
    for name, op, value in req.changes:
        if op == SET:
            new[name] = value   # type: ignore[assignment]
        elif op == DELETE:
            new.pop(name, None)
        elif op in (APPEND, SUBTRACT):
            # Kafka 4.4's controller splits no GROUP key (its config schema has no list type
            # for groups), so it refuses both on every key, the list one and unknown names too
            # (seen on the wire: test_diff_group_configs.py)
            raise ApiError(ErrorCode.invalid_config,
                           f"Can't {_OP_NAMES[op]} to key {name} because its type is not LIST.")
        else:
            raise ApiError(ErrorCode.invalid_request, f"Unknown operation type {op} for {name}")
    return new


def alter_group_configs(shard: Any, ctx: Any, req: AlterGroupConfigs, now_ms: int) -> Result:
    store = store_of(shard)
    current = store.configs(req.group_id)
    try:
        if not req.group_id:
            raise ApiError(ErrorCode.invalid_request, "Default group resources are not allowed.")
        new = _changed(current, req)
        validate(new, shard.config)
    except ApiError as e:
        return Result(response=(e.code, e.message))
    if req.validate_only or new == current:
        return Result(response=(ErrorCode.none, None))
    key = GroupConfigKey(req.group_id)
    record = (CoordinatorRecord(key, GroupConfigValue(tuple(GroupConfigEntry(k, v) for k, v in new.items()))) if new
              else CoordinatorRecord(key, None))
    return Result(response=(ErrorCode.none, None), records=[record])
