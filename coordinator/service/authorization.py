"""Authorization, as a stage around the group APIs' handlers: Kafka's KafkaApis role
(coordinator/authz.py holds the rules; docs/user/security-acls.md).

Rules of this module:
- Only with an authorizer: with ALLOW_ALL the service calls the handler directly and this
  stage costs nothing.
- Every check an API gets is read from its row in the API table
  (coordinator/protocol/api_table.py): its TransactionalId, GROUP and TOPIC operations, how it
  names its groups, its topic-level check and its error response.
- The order is Kafka's: TransactionalId WRITE first (TxnOffsetCommit, AddOffsetsToTxn:
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED on everything), then the group operation, then the
  API's topic-level checks (topic_checks.py), then AuthorizedOperations when asked.
- A single-group request the client may not act on gets its error response unrun; a
  multi-group one answers the denied groups GROUP_AUTHORIZATION_FAILED and serves the
  rest; ListGroups lists only the groups the client may see.
- A heartbeat that subscribes to topics resolves its regexes with the member's rights
  (KAFKA-18813; `AuthorizedRequestContext`, regex_refresh.py).
- An authorizer that asks elsewhere first (authorizer=probe: security/acl_probe.py) has an
  async `prepare(client, actions)`, awaited with every resource a check will read before
  its synchronous verdicts.
- Every refusal is counted (security/metrics.py `count_denied`); labels are API names,
  never a client's value.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from .. import authz
from ..authz import Action, Authorizer, authorized_operations, denied_groups
from ..config import CoordinatorConfig
from ..group.context import AuthorizedRequestContext
from ..group.errors import ApiError
from ..group.image import MetadataImage
from ..group.modern.consumer.regex import excluded_topics, resolve
from ..group.shard import RequestContext
from ..protocol.api_table import ApiSpec, Groups
from ..protocol.apis import DESCRIBE_GROUPS, LIST_GROUPS
from ..protocol.service import ClientInfo
from ..runtime.shard_runtime import ShardRuntime
from ..security.metrics import count_denied
from .topic_checks import TopicChecks


class AuthorizationStage:
    """Runs a handler under the client's rights: `authorized(handler, api_key, ...)`."""

    def __init__(self, authorizer: Authorizer, apis: Mapping[int, ApiSpec], config: CoordinatorConfig,
                 image: Callable[[], MetadataImage], runtime_for: Callable[[str], ShardRuntime]) -> None:
        self.authorizer = authorizer
        self.apis = apis                    # API key -> its row in the API table (the registry's)
        self.config = config                # the regex exclusions (group.consumer.regex...)
        self.image = image                  # the current metadata image
        self.runtime_for = runtime_for      # a group's shard: the regexes its members use
        self._prepare_hook: Callable[[ClientInfo, list[Action]], Awaitable[None]] | None = getattr(
            authorizer, "prepare", None)
        self._candidates: dict[Any, Any] = {}     # regex -> topics it matches in the image (key None)
        self.topics = TopicChecks(authorizer, apis, image, self.prepare)

    async def authorized(self, handler, api_key: int, api_version: int, request: Any, client: ClientInfo) -> Any:
        """The authorization hook (coordinator/authz.py), Kafka's KafkaApis rules: a
        single-group request the client may not act on gets its error response; a multi-group
        one answers the denied groups with the error and serves the rest; ListGroups lists
        only what it may see; then the topic-level checks of the API (topic_checks.py) and
        AuthorizedOperations when asked."""
        spec = self.apis[api_key]
        if self._prepare_hook is not None:
            await self._prepare_hook(client, self.needed_actions(spec, api_version, request))
        # KafkaApis asks TransactionalId WRITE before the group (TxnOffsetCommit,
        # AddOffsetsToTxn): TRANSACTIONAL_ID_AUTHORIZATION_FAILED on everything.
        if authz.transactional_id_denied(self.authorizer, client, spec, request):
            count_denied(spec.name, authz.TRANSACTIONAL_ID, 1)
            return spec.error_response(api_version, ApiError(ErrorCode.transactional_id_authorization_failed), request)
        denied = denied_groups(self.authorizer, client, spec, api_version, request)
        if denied:
            count_denied(spec.name, authz.GROUP, len(denied))
        if spec.groups is Groups.LISTED:
            response = await handler(RequestContext(api_version, client.client_id or "", f"/{client.host}"), request)
            await self.prepare(client, [Action(authz.DESCRIBE, authz.GROUP, g.group_id) for g in response.groups])
            return self.visible_groups(response, client)
        if denied and not spec.names_many(api_version):
            return spec.error_response(api_version, ApiError(ErrorCode.group_authorization_failed), request)
        ctx = RequestContext(api_version, client.client_id or "", f"/{client.host}",
                             frozenset(denied) if denied else frozenset()) if not spec.subscribes \
            else AuthorizedRequestContext(api_version, client.client_id or "", f"/{client.host}",
                                          frozenset(denied) if denied else frozenset(), self.topic_filter(client))
        check = spec.topic_check
        if check is not None:
            if isinstance(check, str):      # a core row names a TopicChecks method
                check = getattr(TopicChecks, check)
            return await check(self.topics, handler, ctx, request, client)
        response = await handler(ctx, request)
        if api_key == DESCRIBE_GROUPS and getattr(request, "include_authorized_operations", False):
            response = self.with_authorized_operations(response, client)
        return response

    def topic_filter(self, client: ClientInfo) -> Callable[[Collection[str]], frozenset[str]]:
        """The client's DESCRIBE filter for regex resolution (KAFKA-18813; regex_refresh.py)."""
        authorizer = self.authorizer

        def describable(names: Collection[str]) -> frozenset[str]:
            ordered = list(names)
            verdicts = authorizer.authorize(client, [Action(authz.DESCRIBE, authz.TOPIC, n) for n in ordered])
            return frozenset(n for n, ok in zip(ordered, verdicts) if ok)
        return describable

    async def prepare(self, client: ClientInfo, actions: list[Action]) -> None:
        if self._prepare_hook is not None and actions:
            await self._prepare_hook(client, actions)

    def needed_actions(self, spec: ApiSpec, api_version: int, request: Any) -> list[Action]:
        """The resources this request's checks read, for `prepare` (an authorizer=probe
        probes per resource, so one action per resource is enough; answers' topics and
        groups are prepared where they are known)."""
        operation = spec.group_operation
        actions = [Action(operation, authz.GROUP, g) for g in spec.group_ids_of(api_version, request)] \
            if operation is not None else []
        if spec.transactional_id_operation is not None:
            actions.append(Action(spec.transactional_id_operation, authz.TRANSACTIONAL_ID, request.transactional_id))
        if spec.groups is Groups.LISTED:
            actions.append(Action(authz.DESCRIBE, authz.CLUSTER, authz.CLUSTER_NAME))
        elif spec.subscribes:
            actions.extend(Action(authz.DESCRIBE, authz.TOPIC, n) for n in request.subscribed_topic_names or ())
            # The topics a regex resolution may give this member (KAFKA-18813): resolution
            # runs later, in a timer, with this member's filter (regex_refresh.py), so its
            # verdicts are probed at every heartbeat of a regex group and stay fresh.
            regexes = set(getattr(self.runtime_for(request.group_id).shard.groups.get(request.group_id),
                                  "regex_subscribers", ()))
            regex = getattr(request, "subscribed_topic_regex", None)
            if regex:
                regexes.add(regex)
            for r in regexes:
                actions.extend(Action(authz.DESCRIBE, authz.TOPIC, n) for n in self.regex_candidates(r))
        elif spec.topic_operation is not None:
            # The topics it names: per group from the version naming several (OffsetFetch v8+).
            lists = [g.topics for g in request.groups] if spec.names_many(api_version) else [request.topics]
            actions.extend(Action(spec.topic_operation, authz.TOPIC, n) for topics in lists if topics
                           for t in topics if (n := self.topics.topic_name(t)) is not None)
        return actions

    def regex_candidates(self, regex: str) -> frozenset[str]:
        """The topics ``regex`` matches in the current image (remembered per image)."""
        image = self.image()
        cache = self._candidates
        if cache.get(None) is not image:
            cache.clear()
            cache[None] = image
        found = cache.get(regex)
        if found is None:
            try:
                found = resolve(regex, image.topics_by_name, excluded_topics(self.config))
            except ApiError:
                found = frozenset()        # the handler answers INVALID_REGULAR_EXPRESSION
            if len(cache) < 10_000:
                cache[regex] = found
        return found

    def visible_groups(self, response: Any, client: ClientInfo) -> Any:
        """Kafka's ListGroups: every group with DESCRIBE on the cluster, else only the groups
        the client may DESCRIBE."""
        if self.authorizer.authorize(client, [Action(authz.DESCRIBE, authz.CLUSTER, authz.CLUSTER_NAME)])[0]:
            return response
        groups = response.groups
        verdicts = self.authorizer.authorize(client, [Action(authz.DESCRIBE, authz.GROUP, g.group_id) for g in groups])
        visible = tuple(g for g, ok in zip(groups, verdicts) if ok)
        if len(visible) < len(groups):
            count_denied(self.apis[LIST_GROUPS].name, authz.GROUP, len(groups) - len(visible))
        return dataclasses.replace(response, groups=visible)

    def with_authorized_operations(self, response: Any, client: ClientInfo) -> Any:
        """AuthorizedOperations of each described group served without error (Kafka fills it
        only for those)."""
        return dataclasses.replace(response, groups=tuple(
            dataclasses.replace(g, authorized_operations=authorized_operations(self.authorizer, client, g.group_id))
            if g.error_code == ErrorCode.none else g for g in response.groups))
