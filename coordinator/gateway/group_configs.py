"""The GROUP resources of the config APIs, taken out of a client's request and served by
kcoord (docs/user/group-configs.md): DescribeConfigs (32), AlterConfigs (33),
IncrementalAlterConfigs (44), and ListConfigResources v1 (74) when it asks for groups.

Rules of this module:
- kcoord is the one source of truth of its groups' configs, so no GROUP resource reaches the
  upstream, whose own group configs (Kafka >= 4.0) would be a second one: a request naming
  only GROUP resources is answered by the service; a mixed one is split, the rest forwarded
  (through the guard's own rules for it: `rest_decision`), and the two answers joined into
  one, in the request's order. ListConfigResources' GROUP entries from upstream are dropped
  and kcoord's put in their place.
- The service's part may wait (a state-topic write) and upstream's may come first, or last:
  `JoinedPending` holds the client's place in its ordered answers until both are in; the
  answer's size is counted in the connection's held bytes as upstream's would be.
- A service failure (not a refusal of one resource: those are answers) closes the
  connection, as any group call that fails (group_calls.py).
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from ..protocol.apis import ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS
from ..protocol.codec import decode_response_frame, encode_body, encode_response_frame
from ..protocol.framing import SIZE, read_client_id
from . import eager
from .forward import Pending

log = logging.getLogger("kcoord.gateway")

DESCRIBE_CONFIGS = 32
LIST_CONFIG_RESOURCES = 74
GROUP_CONFIG_APIS = frozenset({DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS, LIST_CONFIG_RESOURCES})
GROUP = 32                          # ConfigResource.Type.GROUP
FIELD = {DESCRIBE_CONFIGS: "results", ALTER_CONFIGS: "responses", INCREMENTAL_ALTER_CONFIGS: "responses",
         LIST_CONFIG_RESOURCES: "config_resources"}


def _is_group(resource: Any) -> bool:
    return int(resource.resource_type) == GROUP


def takes(api_key: int, version: int, request: Any) -> bool:
    """Whether the request names GROUP resources (ListConfigResources v1: asks for them,
    explicitly or by an empty list, Kafka's "every supported type")."""
    if api_key == LIST_CONFIG_RESOURCES:
        return version >= 1 and (not request.resource_types or GROUP in request.resource_types)
    return any(_is_group(r) for r in request.resources)


def split(api_key: int, request: Any) -> tuple[Any, Any | None]:
    """(the GROUP part, served here; the rest to forward, or None)."""
    if api_key == LIST_CONFIG_RESOURCES:
        types = tuple(request.resource_types)
        rest = None if types == (GROUP,) or (types and all(t == GROUP for t in types)) else \
            dataclasses.replace(request, resource_types=tuple(t for t in types if t != GROUP))
        return dataclasses.replace(request, resource_types=(GROUP,)), rest
    groups = tuple(r for r in request.resources if _is_group(r))
    others = tuple(r for r in request.resources if not _is_group(r))
    return (dataclasses.replace(request, resources=groups),
            dataclasses.replace(request, resources=others) if others else None)


def join(api_key: int, version: int, request: Any, local: Any, upstream: Any) -> Any:
    """Upstream's answer with the GROUP answers in their places: per resource in the
    request's order (upstream's entries matched by type and name, any left over at the end);
    ListConfigResources: upstream's non-GROUP entries, then kcoord's groups."""
    field = FIELD[api_key]
    theirs = list(getattr(upstream, field))
    if api_key == LIST_CONFIG_RESOURCES:
        kept = tuple(r for r in theirs if not _is_group(r))
        return dataclasses.replace(upstream, **{field: kept + tuple(getattr(local, field))})
    ours = list(getattr(local, field))
    out = []
    for r in request.resources:
        pool = ours if _is_group(r) else theirs
        for i, entry in enumerate(pool):
            if entry.resource_name == r.resource_name and int(entry.resource_type) == int(r.resource_type):
                out.append(pool.pop(i))
                break
    return dataclasses.replace(upstream, **{field: tuple(out + theirs + ours)})


class JoinedPending(Pending):
    """A client's place in its ordered answers, filled once upstream's answer (set as
    ``data`` by the link, forward.py) and the service's part are both in."""

    __slots__ = ("_client", "_finish", "_upstream", "_local", "_joined")

    def __init__(self, correlation_id: int, route: Any, size: int, client: Any,
                 finish: Callable[[bytes, Any], bytes]) -> None:
        self._client, self._finish = client, finish
        self._upstream: bytes | None = None
        self._local: Any = None
        self._joined: bytes | None = None
        super().__init__(correlation_id, route, size)

    @property   # type: ignore[override]
    def data(self) -> bytes | None:
        return self._joined

    @data.setter
    def data(self, frame: bytes | None) -> None:
        if frame is None:
            return
        self._upstream = frame
        if self._local is not None:
            self._complete()

    def local_done(self, outcome: Any) -> None:
        self._local = outcome
        if self._upstream is not None:
            self._complete()
            self._client.loop.call_soon(self._client.flush)

    def _complete(self) -> None:
        upstream = self._upstream
        assert upstream is not None
        try:
            joined = self._finish(upstream, self._local)
        except Exception as e:     # a response that does not decode: as a merge that fails (forward.py)
            log.warning("closing connection: the GROUP part of %s could not be joined with upstream's "
                        "answer: %s", self.route.api_key, e)
            self._client.close()
            return
        # The link counts upstream's frame in the connection's held bytes; flush releases ours.
        self._client.held += len(joined) - len(upstream)
        self._joined = joined


# What the guard decided for the rest: ("forward", frame, merge or None) or ("local", response).
RestDecision = tuple


def serve(client: Any, service: Any, frame: bytes, route: Any, correlation_id: int, request: Any,
          body_offset: int, rest_decision: Callable[[Any, bytes], RestDecision]) -> None:
    """Serve ``request``'s GROUP part here and the rest as the guard decides
    (``rest_decision(rest request, rest frame)``): forwarded, its answer first merged with the
    guard's own refusals, then joined with ours; or answered by the guard, then joined here."""
    api_key, version = route.api_key, route.api_version
    groups, rest = split(api_key, request)
    # The client id is the service's to see: the audit log names it, and an Envelope to the
    # owner of another instance's groups carries it (protocol/envelope.py).
    info = client.request_info(read_client_id(frame, 12)[0])
    call = eager.start(service.serve_group_configs(api_key, version, groups, info), client.loop)
    if rest is None:
        client.serve_outcome(call, route, correlation_id, len(frame))
        return
    payload = bytes(frame[4:body_offset]) + encode_body(rest)
    decision = rest_decision(rest, SIZE.pack(len(payload)) + payload)
    if decision[0] == "local":
        answered = decision[1]

        async def both() -> Any:
            local = await call if isinstance(call, asyncio.Task) else _value(call)
            return join(api_key, version, request, local, answered)
        client.serve_outcome(eager.start(both(), client.loop), route, correlation_id, len(frame))
        return
    _, rest_frame, merge = decision

    def finish(upstream: bytes, local: Any) -> bytes:
        if merge is not None:
            upstream = merge(upstream)
        cid, theirs = decode_response_frame(api_key, version, upstream)
        return encode_response_frame(api_key, version, cid, join(api_key, version, request, local, theirs))

    pending = JoinedPending(correlation_id, route, len(frame), client, finish)
    client.forward(rest_frame, pending)
    if not isinstance(call, asyncio.Task):
        if call.error is not None:
            client.close()
        else:
            pending.local_done(call.value)
        return

    def done(task: asyncio.Task) -> None:
        if task.cancelled() or task.exception() is not None:
            client.close()
            return
        pending.local_done(task.result())
    call.add_done_callback(done)


def _value(done: eager.Done) -> Any:
    if done.error is not None:
        raise done.error
    return done.value
