"""The topic-level checks each group API makes after its group check (Kafka's KafkaApis;
KAFKA-18813), a part of the authorization stage (authorization.py).

Rules of this module:
- OffsetCommit, TxnOffsetCommit and OffsetDelete need Topic READ per topic: a refused topic
  answers TOPIC_AUTHORIZATION_FAILED on each of its partitions and is left out of what the
  handler sees; answers come back in request order. A commit left with no topic is not run;
  an offset deletion is (its group-level checks still apply).
- OffsetFetch needs Topic DESCRIBE: named topics the client may not describe answer
  TOPIC_AUTHORIZATION_FAILED per partition; a fetch of all topics silently keeps only the
  describable ones, as Kafka does.
- ConsumerGroupHeartbeat needs DESCRIBE on every SubscribedTopicNames; ConsumerGroupDescribe
  answers a group whose members' topics are not all describable TOPIC_AUTHORIZATION_FAILED.
- A topic id is resolved through the current metadata image; an id the image does not know
  is not refused here (the handler answers UNKNOWN_TOPIC_ID).
- Every refusal is counted (security/metrics.py `count_denied`), labelled by the API's name.
"""
from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from .. import authz
from ..authz import Action, Authorizer, authorized_operations
from ..group.errors import ApiError
from ..group.image import MetadataImage
from ..group.kio_util import build, schema
from ..group.shard import RequestContext
from ..group.timeutil import from_ms
from ..protocol import error_responses
from ..protocol.api_table import ApiSpec
from ..protocol.apis import (
    CONSUMER_GROUP_DESCRIBE,
    CONSUMER_GROUP_HEARTBEAT,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    TXN_OFFSET_COMMIT,
)
from ..protocol.service import ClientInfo
from ..security.metrics import count_denied

TOPIC_DESCRIBE_REFUSED = "The described group uses topics that the client is not authorized to describe."


class TopicChecks:
    """Topic-level authorization of the group APIs, one method per API (named by the API's
    row, `ApiSpec.topic_check`): ``check(handler, ctx, request, client)`` runs the handler on
    what the client may see."""

    def __init__(self, authorizer: Authorizer, apis: Mapping[int, ApiSpec], image: Callable[[], MetadataImage],
                 prepare: Callable[[ClientInfo, list[Action]], Awaitable[None]]) -> None:
        self.authorizer = authorizer
        self.apis = apis            # API key -> its row in the API table (its name labels refusals)
        self.image = image          # the current metadata image
        self.prepare = prepare      # the authorizer's preparation of verdicts (authorization.py)

    def topic_name(self, topic: Any) -> str | None:
        """A request or response topic's name; a topic id (v10+) is resolved through the
        metadata image (None if unknown: the handler answers UNKNOWN_TOPIC_ID)."""
        name = getattr(topic, "name", None)
        if name is not None:
            return name
        topic_id = getattr(topic, "topic_id", None)
        found = self.image().topics_by_id.get(topic_id) if topic_id is not None else None
        return found.name if found is not None else None

    def refused_topics(self, client: ClientInfo, api_key: int, operation: str, topics) -> set[int]:
        """Indexes of the topics (named or by id) the client may not perform ``operation`` on.
        A topic id the image does not know is not refused here (the handler answers it)."""
        names = [(i, self.topic_name(t)) for i, t in enumerate(topics)]
        known = [(i, n) for i, n in names if n is not None]
        if not known:
            return set()
        verdicts = self.authorizer.authorize(client, [Action(operation, authz.TOPIC, n) for _, n in known])
        refused = {i for (i, _), ok in zip(known, verdicts) if not ok}
        if refused:
            count_denied(self.apis[api_key].name, authz.TOPIC, len(refused))
        return refused

    async def _commit_topics(self, handler, ctx: RequestContext, req, client: ClientInfo, api_key: int,
                             api: str, prefix: str):
        """OffsetCommit and OffsetDelete: Topic READ per topic. Refused topics answer
        TOPIC_AUTHORIZATION_FAILED per partition and are left out of what the handler sees;
        answers come back in request order. A commit left with no topic is not run (Kafka's
        KafkaApis); an offset deletion is (its group-level checks still apply)."""
        refused = self.refused_topics(client, api_key, authz.READ, req.topics)
        if not refused:
            return await handler(ctx, req)
        mod = schema(api, ctx.api_version)
        part_cls, topic_cls = getattr(mod, f"{prefix}ResponsePartition"), getattr(mod, f"{prefix}ResponseTopic")
        allowed = tuple(t for i, t in enumerate(req.topics) if i not in refused)
        response = None
        if allowed or api_key == OFFSET_DELETE:
            response = await handler(ctx, dataclasses.replace(req, topics=allowed))
        served: dict[Any, list] = defaultdict(list)
        for t in (response.topics if response is not None else ()):
            served[_topic_key(t)].append(t)
        out = []
        for i, t in enumerate(req.topics):
            if i in refused:
                out.append(build(topic_cls, name=getattr(t, "name", None), topic_id=getattr(t, "topic_id", None),
                                 partitions=tuple(build(part_cls, partition_index=p.partition_index,
                                                        error_code=ErrorCode.topic_authorization_failed)
                                                  for p in t.partitions)))
            else:
                answers = served.get(_topic_key(t))
                if answers:
                    out.append(answers.pop(0))
        out.extend(t for rest in served.values() for t in rest)
        if response is None:
            return build(getattr(mod, f"{prefix}Response"), throttle_time=from_ms(0), error_code=ErrorCode.none,
                         topics=tuple(out))
        return dataclasses.replace(response, topics=tuple(out))

    async def offset_commit(self, handler, ctx, req, client):
        return await self._commit_topics(handler, ctx, req, client, OFFSET_COMMIT, "offset_commit", "OffsetCommit")

    async def txn_offset_commit(self, handler, ctx, req, client):
        return await self._commit_topics(handler, ctx, req, client, TXN_OFFSET_COMMIT, "txn_offset_commit",
                                         "TxnOffsetCommit")

    async def offset_delete(self, handler, ctx, req, client):
        return await self._commit_topics(handler, ctx, req, client, OFFSET_DELETE, "offset_delete", "OffsetDelete")

    def _fetch_filter(self, client: ClientInfo, topics):
        """(topics to fetch, refused named topics) of one group of an OffsetFetch."""
        if topics is None:
            return None, ()
        refused = self.refused_topics(client, OFFSET_FETCH, authz.DESCRIBE, topics)
        if not refused:
            return topics, ()
        return (tuple(t for i, t in enumerate(topics) if i not in refused),
                tuple(t for i, t in enumerate(topics) if i in refused))

    def _fetch_merge(self, client: ClientInfo, mod, version: int, requested, refused, topics) -> tuple:
        """One group's fetched topics after authorization: fetch-all keeps only the topics
        the client may DESCRIBE (silently, as Kafka); named topics it may not describe answer
        TOPIC_AUTHORIZATION_FAILED per partition, in request order."""
        if requested is None:
            drop = self.refused_topics(client, OFFSET_FETCH, authz.DESCRIBE, topics)
            # An id the image no longer knows cannot be checked: it is not shown either.
            drop |= {i for i, t in enumerate(topics) if self.topic_name(t) is None}
            return tuple(t for i, t in enumerate(topics) if i not in drop) if drop else tuple(topics)
        if not refused:
            return tuple(topics)
        suffix = "s" if version >= 8 else ""
        part_cls = getattr(mod, f"OffsetFetchResponsePartition{suffix}")
        topic_cls = getattr(mod, f"OffsetFetchResponseTopic{suffix}")
        refused_keys = {_topic_key(t) for t in refused}
        served: dict[Any, list] = defaultdict(list)
        for t in topics:
            served[_topic_key(t)].append(t)
        out = []
        for t in requested:
            key = _topic_key(t)
            if key in refused_keys:
                out.append(build(topic_cls, name=getattr(t, "name", None), topic_id=getattr(t, "topic_id", None),
                                 partitions=tuple(build(part_cls, partition_index=p, committed_offset=-1,
                                                        committed_leader_epoch=-1, metadata="",
                                                        error_code=ErrorCode.topic_authorization_failed)
                                                  for p in t.partition_indexes)))
            elif served.get(key):
                out.append(served[key].pop(0))
        out.extend(t for rest in served.values() for t in rest)
        return tuple(out)

    async def offset_fetch(self, handler, ctx: RequestContext, req, client: ClientInfo):
        """OffsetFetch: Topic DESCRIBE (KafkaApis), every version, each group of v8+."""
        version = ctx.api_version
        mod = schema("offset_fetch", version)
        if version < 8:
            allowed, refused = self._fetch_filter(client, req.topics)
            response = await handler(ctx, dataclasses.replace(req, topics=allowed) if refused else req)
            if getattr(response, "error_code", ErrorCode.none) != ErrorCode.none:
                return response
            if req.topics is None:
                await self.prepare(client, [Action(authz.DESCRIBE, authz.TOPIC, n) for t in response.topics
                                            if (n := self.topic_name(t)) is not None])
            return dataclasses.replace(response, topics=self._fetch_merge(client, mod, version, req.topics, refused,
                                                                          response.topics))
        original = req.groups
        split = [self._fetch_filter(client, g.topics) if g.group_id not in ctx.denied_groups else (g.topics, ())
                 for g in original]
        if any(refused for _, refused in split):
            req = dataclasses.replace(req, groups=tuple(
                dataclasses.replace(g, topics=allowed) if refused else g
                for g, (allowed, refused) in zip(original, split)))
        response = await handler(ctx, req)
        await self.prepare(client, [Action(authz.DESCRIBE, authz.TOPIC, n)
                                    for g, answer in zip(original, response.groups) if g.topics is None
                                    for t in answer.topics if (n := self.topic_name(t)) is not None])
        groups = []
        for g, (_, refused), answer in zip(original, split, response.groups):
            if answer.error_code != ErrorCode.none or g.group_id in ctx.denied_groups:
                groups.append(answer)
                continue
            groups.append(dataclasses.replace(answer, topics=self._fetch_merge(
                client, mod, version, g.topics, refused, answer.topics)))
        return dataclasses.replace(response, groups=tuple(groups))

    async def consumer_group_heartbeat(self, handler, ctx: RequestContext, req, client: ClientInfo):
        """ConsumerGroupHeartbeat: DESCRIBE on every topic of SubscribedTopicNames, else the
        request answers TOPIC_AUTHORIZATION_FAILED (KAFKA-18813). A steady heartbeat sends
        no names and costs nothing more."""
        names = req.subscribed_topic_names
        if names:
            verdicts = self.authorizer.authorize(client, [Action(authz.DESCRIBE, authz.TOPIC, n) for n in names])
            if not all(verdicts):
                count_denied(self.apis[CONSUMER_GROUP_HEARTBEAT].name, authz.TOPIC, verdicts.count(False))
                return error_responses.consumer_group_heartbeat(
                    ctx.api_version, ApiError(ErrorCode.topic_authorization_failed), req)
        return await handler(ctx, req)

    async def consumer_group_describe(self, handler, ctx: RequestContext, req, client: ClientInfo):
        """ConsumerGroupDescribe: a described group whose members' assigned or target topics
        are not all describable answers TOPIC_AUTHORIZATION_FAILED and nothing else
        (KAFKA-18813); AuthorizedOperations filled when asked."""
        response = await handler(ctx, req)
        await self.prepare(client, [Action(authz.DESCRIBE, authz.TOPIC, tp.topic_name) for g in response.groups
                                    for m in g.members for a in (m.assignment, m.target_assignment)
                                    for tp in a.topic_partitions])
        mod = schema("consumer_group_describe", ctx.api_version)
        include = req.include_authorized_operations
        groups = []
        for g in response.groups:
            if g.error_code != ErrorCode.none:
                groups.append(g)
                continue
            topics = sorted({tp.topic_name for m in g.members for a in (m.assignment, m.target_assignment)
                             for tp in a.topic_partitions})
            if topics:
                verdicts = self.authorizer.authorize(client, [Action(authz.DESCRIBE, authz.TOPIC, t) for t in topics])
                if not all(verdicts):
                    count_denied(self.apis[CONSUMER_GROUP_DESCRIBE].name, authz.TOPIC, verdicts.count(False))
                    groups.append(error_responses.described_consumer_group_error(mod, g.group_id, ApiError(
                        ErrorCode.topic_authorization_failed, TOPIC_DESCRIBE_REFUSED)))
                    continue
            if include:
                g = dataclasses.replace(g, authorized_operations=authorized_operations(self.authorizer, client,
                                                                                       g.group_id))
            groups.append(g)
        return dataclasses.replace(response, groups=tuple(groups))


def _topic_key(topic: Any) -> Any:
    name = getattr(topic, "name", None)
    return name if name is not None else getattr(topic, "topic_id", None)
