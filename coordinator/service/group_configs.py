"""Per-group configuration served by the group coordinator service: the GROUP resources
(`ConfigResource.Type.GROUP` = 32) of DescribeConfigs (32), AlterConfigs (33),
IncrementalAlterConfigs (44) and ListConfigResources (74), as Kafka 4.4 answers them
(docs/user/group-configs.md). The gateway hands over only a request's GROUP resources
(coordinator/gateway/group_configs.py) and merges these answers with upstream's.

Rules of this module:
- Authorization as KafkaApis: Group DESCRIBE_CONFIGS to describe a group's configs, Group
  ALTER_CONFIGS to change them; a denied resource answers GROUP_AUTHORIZATION_FAILED and is
  not read. ListConfigResources lists only the groups the client may DESCRIBE_CONFIGS.
- Each group's configs live on the shard that owns the group (service/routing.py): a read
  or a change runs there; a shard that cannot serve (loading, not the coordinator, a failed
  write) answers its own error for that resource only. In a kcoord cluster, the groups of
  another instance's shards are asked of that instance in an Envelope carrying the client
  (service/group_config_peers.py), and ListConfigResources lists every instance's groups; a
  request that came in an Envelope (`forwarded`) is served from this instance's shards only
  (service/envelope.py).
- DescribeConfigs answers for any group name, existing or not: every key of Kafka 4.4's
  `GroupConfig` (the internal ones only when named), the value set on the group with source
  GROUP_CONFIG, else the broker's with source DEFAULT_CONFIG (STATIC_BROKER_CONFIG where
  kcoord's configuration changed it; Kafka's `ConfigHelper.createGroupConfigEntry`);
  read-only false, never sensitive; synonyms and documentation only when asked. An empty
  group name is INVALID_REQUEST.
- A change (AlterConfigs, IncrementalAlterConfigs) is a group mutation: written to the
  audit log, one line per group, whatever its outcome (security/audit.py).
- Legacy AlterConfigs on a GROUP replaces the group's whole set, as Kafka 4.4's controller
  does (it authorizes GROUP in `ControllerApis.authorizeAlterResource`).
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import sys
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from ..authz import ALLOW_ALL, GROUP, Action
from ..config import CoordinatorConfig
from ..gateway.ratelog import RateLimitedLog
from ..group.configs.docs import DOCUMENTATION
from ..group.configs.keys import KEYS
from ..group.configs.ops import AlterGroupConfigs, ReadGroupConfigs
from ..group.errors import ApiError
from ..group.shard import RequestContext
from ..protocol.apis import response_class
from ..protocol.service import ClientInfo
from . import group_config_peers as peering

GROUP_RESOURCE = 32
GROUP_CONFIG_SOURCE = 8        # DescribeConfigs' ConfigSource.GROUP_CONFIG
DEFAULT_CONFIG_SOURCE = 5
STATIC_BROKER_CONFIG_SOURCE = 4
DESCRIBE_CONFIGS, ALTER_CONFIGS = "DESCRIBE_CONFIGS", "ALTER_CONFIGS"

_ZERO = timedelta(0)
_DEFAULTS = CoordinatorConfig()
GroupConfigService = Any       # the GroupCoordinatorService (this module is below it)
# A client may ask ListConfigResources at will while a shard moves: its failures are logged
# at a bounded rate (gateway/ratelog.py).
_LIST_FAILURES = RateLimitedLog(logging.getLogger("kcoord.service"), 1.0)


async def _denied(service: GroupConfigService, info: ClientInfo, operation: str, names: Sequence[str]) -> set[str]:
    authorizer = service.authorizer
    if authorizer is ALLOW_ALL or not names:
        return set()
    actions = [Action(operation, GROUP, n) for n in names]
    prepare = getattr(authorizer, "prepare", None)
    if prepare is not None:
        await prepare(info, actions)
    return {n for n, ok in zip(names, authorizer.authorize(info, actions)) if not ok}


async def _per_shard(service: GroupConfigService, names: Sequence[str], op) -> dict[str, Any]:
    """``op(shard, names, now)`` on each shard owning some of ``names``; a shard's failure
    (an ApiError) is the answer of each of its names."""
    answers: dict[str, Any] = {}

    async def run(rt: Any, gids: list[str]) -> None:
        answers.update(zip(gids, await rt.run(lambda shard, now: op(shard, gids, now))))

    await service.router.per_shard(list(dict.fromkeys(names)), run,
                                   lambda gids, e: answers.update((g, e) for g in gids))
    return answers


def _read(shard: Any, gids: list[str], now: int) -> Any:
    result = shard.read_group_configs(None, ReadGroupConfigs(tuple(gids)), now)
    return result._replace(response=[result.response[g] for g in gids])


# --- DescribeConfigs ------------------------------------------------------------------------

def _synonyms(name: str, stored: dict[str, str], config: Any) -> list[tuple[str, str | None, int]]:
    """Kafka's synonyms of a group config, most specific first: the group's own value
    (GROUP_CONFIG), then the broker's setting of the same meaning (DEFAULT_CONFIG, or
    STATIC_BROKER_CONFIG where kcoord's configuration departs from its default); a key with no
    broker setting and no value of its own has its default as its only synonym."""
    key = KEYS[name]
    found: list[tuple[str, str | None, int]] = []
    if name in stored:
        found.append((name, stored[name], GROUP_CONFIG_SOURCE))
    if key.synonym is not None:
        broker = key.default_text(config)
        source = DEFAULT_CONFIG_SOURCE if broker == key.default_text(_DEFAULTS) else STATIC_BROKER_CONFIG_SOURCE
        found.append((key.synonym, broker, source))
    elif not found:
        found.append((name, key.default_text(config), DEFAULT_CONFIG_SOURCE))
    return found


def _entry(m: Any, name: str, stored: dict[str, str], config: Any, synonyms: bool, docs: bool) -> Any:
    """Kafka's `ConfigHelper.createGroupConfigEntry`: the value and source of the most
    specific synonym; never read-only, never sensitive."""
    found = _synonyms(name, stored, config)
    _, value, source = found[0]
    listed = tuple(m.DescribeConfigsSynonym(name=n, value=v, source=s) for n, v, s in found) \
        if synonyms and hasattr(m, "DescribeConfigsSynonym") else ()
    fields = {"name": name, "value": value, "read_only": False, "is_default": source == DEFAULT_CONFIG_SOURCE,
              "config_source": source, "is_sensitive": False, "synonyms": listed,
              "config_type": int(KEYS[name].type), "documentation": DOCUMENTATION.get(name) if docs else None}
    return _make(m.DescribeConfigsResourceResult, fields)


def _make(cls: type, fields: dict[str, Any]) -> Any:
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in fields.items() if k in names})


def _names(keys: Sequence[str] | None) -> list[str]:
    if keys is None:
        return [n for n, k in KEYS.items() if not k.internal]
    return [n for n in dict.fromkeys(keys) if n in KEYS]


async def describe(service: GroupConfigService, info: ClientInfo, m: Any, request: Any,
                   resources: Sequence[Any], forwarded: bool = False) -> list[Any]:
    """The DescribeConfigsResult of each GROUP resource, in order (``m``: the response's module)."""
    names = [r.resource_name for r in resources if r.resource_name]
    denied = await _denied(service, info, DESCRIBE_CONFIGS, names)
    peers = peering.peers_for(service, forwarded)
    here, remote, moving = peering.place(service, peers, list(dict.fromkeys(n for n in names if n not in denied)))
    stored: dict[str, Any] = dict(moving)
    elsewhere, (entries, failed) = await asyncio.gather(
        _per_shard(service, here, _read),
        peering.ask_resources(peers, info, request, resources, remote, "results", by_name=False)
        if remote else _no_entries())
    stored.update(elsewhere)
    stored.update(failed)
    results = []
    for i, r in enumerate(resources):
        if i in entries:        # the owning instance's answer
            results.append(entries[i])
            continue
        name = r.resource_name
        code, configs = ErrorCode.none, ()
        message: str | None = ""        # Kafka's success message is "", not null
        answer = stored.get(name, {})
        if not name:
            code, message = ErrorCode.invalid_request, "Group name must not be empty"
        elif name in denied:
            code, message = ErrorCode.group_authorization_failed, None
        elif isinstance(answer, ApiError):
            code, message = answer.code, answer.message
        else:
            configs = tuple(_entry(m, k, answer, service.config, request.include_synonyms,
                                   getattr(request, "include_documentation", False))
                            for k in _names(r.configuration_keys))
        results.append(m.DescribeConfigsResult(error_code=code, error_message=message,
                                               resource_type=GROUP_RESOURCE, resource_name=name, configs=configs))
    return results


# --- AlterConfigs / IncrementalAlterConfigs -----------------------------------------------

async def alter(service: GroupConfigService, info: ClientInfo, m: Any, request: Any, resources: Sequence[Any],
                incremental: bool, forwarded: bool = False) -> list[Any]:
    """The AlterConfigsResourceResponse of each distinct GROUP resource, in the request's
    order; a group named twice answers once, INVALID_REQUEST "Duplicate resource." (Kafka's
    `ControllerApis`), and is not changed."""
    names = [r.resource_name for r in resources]
    duplicated = {n for n in names if names.count(n) > 1}
    distinct = list(dict.fromkeys(names))
    denied = await _denied(service, info, ALTER_CONFIGS, [n for n in distinct if n and n not in duplicated])
    ctx = RequestContext(api_version=0, client_id=info.client_id or "", client_host=info.host)
    by_name = {r.resource_name: r for r in resources}
    peers = peering.peers_for(service, forwarded)
    _, remote, failed = peering.place(service, peers, [n for n in distinct if n and n not in duplicated | denied])
    ask = peering.ask_resources(peers, info, request, [by_name[n] for n in distinct], remote, "responses",
                                by_name=True) if remote else _no_entries()
    entries, unavailable = await ask
    failed.update(unavailable)
    answers = []
    for i, name in enumerate(distinct):
        if i in entries:        # the owning instance's answer
            answers.append(entries[i])
            continue
        if name in duplicated:
            code, message = ErrorCode.invalid_request, "Duplicate resource."
        elif name in denied:
            code, message = ErrorCode.group_authorization_failed, None
        elif name in failed:
            code, message = failed[name].code, failed[name].message
        else:
            changes = tuple((c.name, int(getattr(c, "config_operation", 0)), c.value) for c in by_name[name].configs)
            req = AlterGroupConfigs(name, changes, incremental, bool(request.validate_only))
            try:
                code, message = await service.runtime_for(name).run(
                    lambda shard, now, req=req: shard.alter_group_configs(ctx, req, now))
            except ApiError as e:
                code, message = e.code, e.message
        answers.append(m.AlterConfigsResourceResponse(error_code=code, error_message=message,
                                                      resource_type=GROUP_RESOURCE, resource_name=name))
    return answers


# --- ListConfigResources ------------------------------------------------------------------

async def list_groups(service: GroupConfigService, info: ClientInfo, request: Any,
                      forwarded: bool = False) -> list[str]:
    """Every group with a config set, on the shards this process serves and, in a kcoord
    cluster, on the other instances' (raises ApiError when one cannot say), that the client
    may DESCRIBE_CONFIGS (sorted, for a stable answer)."""
    peers = peering.peers_for(service, forwarded)
    (answers, _), elsewhere = await asyncio.gather(service.router.every_shard(
        lambda shard, now: shard.read_group_configs(None, ReadGroupConfigs(()), now)._replace(
            response=shard.group_configs.groups())),
        peering.listed_elsewhere(service, peers, info, request) if peers is not None else _no_names())
    names = sorted({g for groups in answers for g in groups} | set(elsewhere))
    denied = await _denied(service, info, DESCRIBE_CONFIGS, names)
    return [n for n in names if n not in denied]


async def _no_entries() -> tuple[dict[int, Any], dict[str, ApiError]]:
    return {}, {}


async def _no_names() -> list[str]:
    return []


def is_group(resource: Any) -> bool:
    return int(resource.resource_type) == GROUP_RESOURCE



# --- the door -----------------------------------------------------------------------------

DESCRIBE_CONFIGS_KEY, ALTER_CONFIGS_KEY, INCREMENTAL_ALTER_CONFIGS_KEY, LIST_CONFIG_RESOURCES_KEY = 32, 33, 44, 74


async def serve(service: GroupConfigService, api_key: int, version: int, request: Any, info: ClientInfo,
                forwarded: bool = False) -> Any:
    """The whole response to a request naming only GROUP resources (the gateway has taken the
    others out, coordinator/gateway/group_configs.py); ``forwarded``: it came from another
    instance in an Envelope (service/envelope.py), and is served from this one's shards only."""
    cls = response_class(api_key, version)
    m = sys.modules[cls.__module__]
    if api_key == DESCRIBE_CONFIGS_KEY:
        return cls(throttle_time=_ZERO, results=tuple(await describe(service, info, m, request, request.resources,
                                                                     forwarded)))
    if api_key in (ALTER_CONFIGS_KEY, INCREMENTAL_ALTER_CONFIGS_KEY):
        response = cls(throttle_time=_ZERO, responses=tuple(await alter(
            service, info, m, request, request.resources, api_key == INCREMENTAL_ALTER_CONFIGS_KEY, forwarded)))
        # A config change is a group mutation: audited as the others (security/audit.py).
        if service.audit is not None:
            service.audit.record(api_key, request, response, info)
        return response
    if api_key == LIST_CONFIG_RESOURCES_KEY:
        try:
            names = await list_groups(service, info, request, forwarded)
        except ApiError as e:   # the response has no message: the log says which instance or shard
            _LIST_FAILURES.log(logging.WARNING, "ListConfigResources of groups answers %s: %s", e.code.name, e.message)
            return cls(throttle_time=_ZERO, error_code=e.code, config_resources=())
        return cls(throttle_time=_ZERO, error_code=ErrorCode.none, config_resources=tuple(
            m.ConfigResource(resource_name=n, resource_type=GROUP_RESOURCE) for n in names))
    raise ValueError(f"API {api_key} has no GROUP resources")
