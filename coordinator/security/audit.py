"""The audit log of group mutations.

One JSON object per line (orjson) for each join, leave, offset commit, group deletion, offset
deletion and group config change (AlterConfigs, IncrementalAlterConfigs on a GROUP resource,
one line per group, with the names of the keys it changes) kcoord serves, whatever its
outcome::

    {"ts":"2026-11-25T15:20:01.123Z","principal":"User:alice","client":"10.0.0.7:53122",
     "listener":"PLAINTEXT","client_id":"app-1","api":"OffsetCommit","action":"commit",
     "group":"orders","outcome":"NONE"}

``outcome`` is the response's error name (NONE when served; GROUP_AUTHORIZATION_FAILED when
refused; for per-partition or per-group answers the first error found, else NONE). Settings:
``audit.log=PATH`` appends to a file (opened once, line-buffered; rotate with copytruncate or
restart), ``audit.log=logger`` writes each line at INFO to the ``kcoord.audit`` logger, unset
turns auditing off. Steady ConsumerGroupHeartbeats are not mutations: only a join
(MemberEpoch 0) and a leave (-1, or -2 for a static member) are recorded.
"""
from __future__ import annotations

import datetime
import logging
from collections.abc import Mapping
from typing import IO, Any

import orjson

from ..protocol.service import ClientInfo

logger = logging.getLogger("kcoord.audit")

# api_key -> (Kafka's request name, audit action)
JOIN_GROUP, LEAVE_GROUP, OFFSET_COMMIT, TXN_OFFSET_COMMIT = 11, 13, 8, 28
DELETE_GROUPS, OFFSET_DELETE, CONSUMER_GROUP_HEARTBEAT = 42, 47, 68
ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 33, 44
GROUP_RESOURCE = 32      # ConfigResource.Type.GROUP: the only config resources kcoord serves
AUDITED: dict[int, tuple[str, str]] = {
    JOIN_GROUP: ("JoinGroup", "join"), LEAVE_GROUP: ("LeaveGroup", "leave"),
    OFFSET_COMMIT: ("OffsetCommit", "commit"), TXN_OFFSET_COMMIT: ("TxnOffsetCommit", "commit"),
    DELETE_GROUPS: ("DeleteGroups", "delete"), OFFSET_DELETE: ("OffsetDelete", "offset_delete"),
    CONSUMER_GROUP_HEARTBEAT: ("ConsumerGroupHeartbeat", "join"),
    ALTER_CONFIGS: ("AlterConfigs", "alter_configs"),
    INCREMENTAL_ALTER_CONFIGS: ("IncrementalAlterConfigs", "alter_configs"),
}


def _first_error(response: Any) -> str:
    code = getattr(response, "error_code", None)
    if code is not None and int(code) != 0:
        return code.name.upper()
    for topic in getattr(response, "topics", ()) or ():
        for p in getattr(topic, "partitions", ()) or ():
            if int(p.error_code) != 0:
                return p.error_code.name.upper()
    return "NONE"


class AuditLog:
    def __init__(self, stream: IO[bytes] | None = None) -> None:
        self._stream = stream

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> AuditLog | None:
        target = (settings.get("audit.log") or "").strip()
        if not target:
            return None
        if target == "logger":
            return cls()
        return cls(open(target, "ab", buffering=0))   # noqa: SIM115 - held for the process's life

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def write(self, entry: dict[str, Any]) -> None:
        line = orjson.dumps(entry)
        if self._stream is not None:
            self._stream.write(line + b"\n")
        else:
            logger.info("%s", line.decode())

    def record(self, api_key: int, request: Any, response: Any, client: ClientInfo) -> None:
        """Record a group mutation, if this request is one (called after it was answered)."""
        entry = AUDITED.get(api_key)
        if entry is None:
            return
        api, action = entry
        if api_key == CONSUMER_GROUP_HEARTBEAT:
            epoch = request.member_epoch
            if epoch == 0:
                action = "join"
            elif epoch in (-1, -2):
                action = "leave"
            else:
                return
        base = {"ts": datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                "principal": client.principal, "client": f"{client.host}:{client.port}",
                "listener": client.listener, "client_id": client.client_id, "api": api, "action": action}
        if api_key == DELETE_GROUPS:
            for r in response.results:
                self.write({**base, "group": r.group_id, "outcome": r.error_code.name.upper()})
            return
        if api_key in (ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS):
            self._configs(base, request, response)
            return
        self.write({**base, "group": request.group_id, "outcome": _first_error(response)})

    def _configs(self, base: dict[str, Any], request: Any, response: Any) -> None:
        """One line per GROUP resource answered: the group, the keys named (a group named
        twice is answered once, INVALID_REQUEST, and listed with every key of its entries),
        validate_only when set (nothing was changed)."""
        keys: dict[str, list[str]] = {}
        for r in request.resources:
            if int(r.resource_type) == GROUP_RESOURCE:
                keys.setdefault(r.resource_name, []).extend(c.name for c in r.configs)
        extra = {"validate_only": True} if request.validate_only else {}
        for r in response.responses:
            if int(r.resource_type) == GROUP_RESOURCE:
                self.write({**base, "group": r.resource_name, "configs": keys.get(r.resource_name, []), **extra,
                            "outcome": r.error_code.name.upper()})
