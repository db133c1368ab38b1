"""Authorizing forwarded requests in kcoord: `ForwardAclGate`.

When the client's identity cannot reach the upstream (client mTLS, or SASL terminated at
kcoord), forwarded requests run upstream as kcoord's own principal, so kcoord must refuse what
the client itself may not do (the confused deputy). The gate implements
`coordinator.authz.RequestGate`: the gateway hands it the ClientInfo and the request frame; it
decodes the body and asks the authorizer for the actions Kafka's KafkaApis would:

| API | actions |
|---|---|
| Produce | TransactionalId WRITE (if transactional), Topic WRITE per topic |
| Fetch | Topic READ per topic (a follower's fetch: Cluster CLUSTER_ACTION) |
| ListOffsets, OffsetForLeaderEpoch, DescribeTopicPartitions | Topic DESCRIBE per topic |
| Metadata | forwarded; the answer filtered: Topic DESCRIBE per topic (see below) |
| CreateTopics | Cluster CREATE or Topic CREATE, per topic |
| DeleteTopics, DeleteRecords | Topic DELETE per topic |
| CreatePartitions | Topic ALTER per topic |
| InitProducerId | TransactionalId WRITE; without one: Cluster IDEMPOTENT_WRITE or WRITE on some topic |
| AddPartitionsToTxn v0-3 | TransactionalId WRITE, Topic WRITE per topic (v4+, broker to broker: CLUSTER_ACTION) |
| AddOffsetsToTxn | TransactionalId WRITE, Group READ |
| EndTxn | TransactionalId WRITE |
| DescribeProducers | Topic READ per topic |
| DescribeTransactions | TransactionalId DESCRIBE per id |
| DescribeConfigs / AlterConfigs / IncrementalAlterConfigs | DESCRIBE_CONFIGS / ALTER_CONFIGS per resource |
| DescribeAcls / CreateAcls / DeleteAcls | Cluster DESCRIBE / ALTER / ALTER |
| DescribeLogDirs, ListPartitionReassignments, DescribeUserScramCredentials | Cluster DESCRIBE |
| ElectLeaders, AlterPartitionReassignments, AlterUserScramCredentials | Cluster ALTER |
| DescribeClientQuotas / AlterClientQuotas | Cluster DESCRIBE_CONFIGS / ALTER_CONFIGS |
| WriteTxnMarkers | Cluster CLUSTER_ACTION |
| SaslHandshake, SaslAuthenticate, DescribeCluster, GetTelemetrySubscriptions, PushTelemetry | none (Kafka asks none) |
| anything else | denied (an API this table does not know is never forwarded) |

A refused request is answered with the API's own authorization error when every resource it
names is refused and the answer is cheap to build here (Produce with acks!=0, Fetch,
ListOffsets, CreateTopics, DeleteTopics, InitProducerId, AddOffsetsToTxn, EndTxn); otherwise
(a request mixing allowed and refused resources, a Produce with acks=0, any other API) the
gateway closes the connection with a WARNING. kcoord does not split a forwarded request.

Metadata is forwarded and its answer filtered on the way back (`metadata_response_filter`,
applied by the gateway after its address rewrite): an all-topics request loses the topics the
client may not DESCRIBE, a named one gets TOPIC_AUTHORIZATION_FAILED for them, as Kafka
answers. Limits (documented in docs/user/security-acls.md): an incremental Fetch
(KIP-227 session) names only changed partitions, so ACLs revoked after the session began are
not seen until the client sends a full fetch. Topic ids (Produce v13, Fetch v13+) are resolved
with ``topic_name_of`` (the gateway's metadata image); an id it does not know is refused.
"""
from __future__ import annotations

import dataclasses
import datetime
import logging
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from ..authz import Action, Authorizer
from ..protocol.apis import request_class, response_class
from ..protocol.codec import decode_body, decode_response_frame, encode_body, encode_response_frame
from ..protocol.framing import body_offset
from ..protocol.service import ClientInfo
from .acl import OPERATION_CODES, SUPPORTED_OPERATIONS
from .metrics import count_denied

log = logging.getLogger("kcoord.security.forward")

CLUSTER = "kafka-cluster"
_METADATA = 3
_ZERO = datetime.timedelta(0)
_NO_TOPIC_ID = uuid.UUID(int=0)

# APIs Kafka asks no authorization for.
UNCHECKED = frozenset({17, 36, 60, 71, 72})    # SaslHandshake, SaslAuthenticate, DescribeCluster, telemetry
_CLUSTER_OPS: dict[int, str] = {
    29: "DESCRIBE", 30: "ALTER", 31: "ALTER",             # DescribeAcls, CreateAcls, DeleteAcls
    35: "DESCRIBE", 46: "DESCRIBE", 50: "DESCRIBE",       # DescribeLogDirs, ListPartitionReassignments, Describe SCRAM
    43: "ALTER", 45: "ALTER", 51: "ALTER",                # ElectLeaders, AlterPartitionReassignments, Alter SCRAM
    48: "DESCRIBE_CONFIGS", 49: "ALTER_CONFIGS",          # DescribeClientQuotas, AlterClientQuotas
    27: "CLUSTER_ACTION",                                 # WriteTxnMarkers
}
# ConfigResource types: 2 topic, 4 broker, 8 broker logger, 16 client metrics, 32 group.
_CONFIG_RESOURCE = {2: "TOPIC", 4: "CLUSTER", 8: "CLUSTER", 16: "CLUSTER", 32: "GROUP"}
_API_NAMES = {0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 19: "CreateTopics", 20: "DeleteTopics",
              21: "DeleteRecords", 22: "InitProducerId", 23: "OffsetForLeaderEpoch", 24: "AddPartitionsToTxn",
              25: "AddOffsetsToTxn", 26: "EndTxn", 32: "DescribeConfigs", 33: "AlterConfigs", 37: "CreatePartitions",
              44: "IncrementalAlterConfigs", 61: "DescribeProducers", 65: "DescribeTransactions",
              75: "DescribeTopicPartitions"}


def _mk(cls: type, **kwargs: Any) -> Any:
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in kwargs.items() if k in names})


class ForwardAclGate:
    """`authz.RequestGate` over an Authorizer. ``topic_name_of`` resolves a topic id to its
    name (the gateway's metadata image); None means ids cannot be resolved (refused)."""

    def __init__(self, authorizer: Authorizer,
                 topic_name_of: Callable[[uuid.UUID], str | None] | None = None) -> None:
        self.authorizer = authorizer
        self.topic_name_of = topic_name_of

    # The plain ForwardGate protocol (no identity, no body): a gate that cannot see the request
    # allows only what Kafka asks nothing for.
    def allow_forward(self, client_host: str, listener: str, api_key: int, api_version: int) -> bool:
        return api_key in UNCHECKED

    def check_forward(self, client: ClientInfo, api_key: int, api_version: int, frame: bytes,
                      header_version: int) -> bool | bytes:
        if api_key in UNCHECKED:
            return True
        try:
            request = decode_body(request_class(api_key, api_version), frame, body_offset(frame, header_version))
        except Exception as e:      # the gateway's own body check answers malformed requests
            log.debug("forward gate: %s v%d does not decode (%s); refused", api_key, api_version, e)
            return False
        return self.check_request(client, api_key, api_version, request)

    def metadata_response_filter(self, client: ClientInfo, api_version: int, frame: bytes,
                                 header_version: int) -> Callable[[bytes], bytes] | None:
        """For a Metadata request this gate let through: the function the forwarded answer
        goes through (after the gateway's address rewrite) so the client sees only what
        Kafka would show it (`filter_metadata`); None when the request does not decode (the
        gateway's own body check answers it)."""
        try:
            request = decode_body(request_class(_METADATA, api_version), frame, body_offset(frame, header_version))
        except Exception:
            return None
        topics = request.topics
        named = bool(topics) if topics is not None else False    # v0: an empty list means every topic
        authorizer = self.authorizer
        # AuthorizedOperations upstream computed for kcoord's principal: recomputed for the client
        topic_ops = bool(getattr(request, "include_topic_authorized_operations", False))
        cluster_ops = bool(getattr(request, "include_cluster_authorized_operations", False))

        def filtered(answer: bytes) -> bytes:
            correlation_id, response = decode_response_frame(_METADATA, api_version, answer)
            out = filter_metadata(authorizer, client, response, named)
            if topic_ops and out.topics:
                out = dataclasses.replace(out, topics=tuple(
                    dataclasses.replace(t, topic_authorized_operations=_operations(authorizer, client, "TOPIC",
                                                                                   t.name or ""))
                    if t.error_code == ErrorCode.none else t for t in out.topics))
            if cluster_ops and hasattr(out, "cluster_authorized_operations"):
                out = dataclasses.replace(out, cluster_authorized_operations=_operations(authorizer, client,
                                                                                         "CLUSTER", CLUSTER))
            return answer if out is response else encode_response_frame(_METADATA, api_version, correlation_id, out)
        return filtered

    def check_request(self, client: ClientInfo, api_key: int, api_version: int, request: Any) -> bool | bytes:
        """True: forward; False: close the connection; bytes: answer this body instead."""
        rule = _RULES.get(api_key)
        if rule is None:
            op = _CLUSTER_OPS.get(api_key)
            if op is None:
                log.warning("forward gate: %s has no authorization rule in kcoord; refused (api %d v%d)",
                            client.principal, api_key, api_version)
                count_denied(str(api_key), "UNKNOWN")
                return False
            return self._all(client, api_key, [Action(op, "CLUSTER", CLUSTER)]) or False
        return rule(self, client, api_key, api_version, request)

    # ---------------------------------------------------------------- helpers
    def _name(self, topic: Any) -> str | None:
        for attr in ("name", "topic", "topic_name"):
            value = getattr(topic, attr, None)
            if value:
                return value
        topic_id = getattr(topic, "topic_id", None)
        if topic_id is not None and self.topic_name_of is not None:
            return self.topic_name_of(topic_id)
        return None

    def _verdicts(self, client: ClientInfo, api_key: int, actions: Sequence[Action]) -> list[bool]:
        verdicts = self.authorizer.authorize(client, actions)
        for a, ok in zip(actions, verdicts):
            if not ok:
                count_denied(_API_NAMES.get(api_key, str(api_key)), a.resource_type)
        return verdicts

    def _all(self, client: ClientInfo, api_key: int, actions: Sequence[Action]) -> bool:
        return all(self._verdicts(client, api_key, actions)) if actions else True

    def _topics(self, client: ClientInfo, api_key: int, operation: str, topics: Sequence[Any]) -> list[bool]:
        """One verdict per topic; a topic id that cannot be resolved is refused."""
        names = [self._name(t) for t in topics]
        known = [(i, n) for i, n in enumerate(names) if n is not None]
        out = [False] * len(topics)
        if len(known) < len(topics):
            count_denied(_API_NAMES.get(api_key, str(api_key)), "TOPIC", len(topics) - len(known))
        for (i, _), ok in zip(known, self._verdicts(client, api_key,
                                                     [Action(operation, "TOPIC", n) for _, n in known])):
            out[i] = ok
        return out

    def _refuse(self, client: ClientInfo, api_key: int, api_version: int, request: Any, answer: Callable[..., Any],
                verdicts: list[bool], **kw: Any) -> bool | bytes:
        """All allowed: forward. All refused: the built answer. Mixed: close."""
        if all(verdicts):
            return True
        if any(verdicts):
            log.warning("forward gate: %s may use only some of the resources of %s v%d; kcoord does not split "
                        "forwarded requests, closing", client.principal, _API_NAMES.get(api_key, api_key),
                        api_version)
            return False
        return encode_body(answer(response_class(api_key, api_version), request, **kw))

    # ------------------------------------------------------------------ rules
    def _produce(self, client, api_key, v, req):
        txn = req.transactional_id
        if txn is not None and not self._all(client, api_key, [Action("WRITE", "TRANSACTIONAL_ID", txn)]):
            return False if req.acks == 0 else encode_body(_produce_error(
                response_class(api_key, v), req, ErrorCode.transactional_id_authorization_failed))
        verdicts = self._topics(client, api_key, "WRITE", req.topic_data)
        if req.acks == 0 and not all(verdicts):
            return False      # no answer is expected: Kafka closes the connection too
        return self._refuse(client, api_key, v, req, _produce_error, verdicts,
                            code=ErrorCode.topic_authorization_failed)

    def _fetch(self, client, api_key, v, req):
        replica = getattr(req, "replica_state", None)
        replica_id = replica.replica_id if replica is not None else getattr(req, "replica_id", -1)
        if replica_id is not None and replica_id >= 0:
            return self._all(client, api_key, [Action("CLUSTER_ACTION", "CLUSTER", CLUSTER)])
        return self._refuse(client, api_key, v, req, _fetch_error, self._topics(client, api_key, "READ", req.topics))

    def _list_offsets(self, client, api_key, v, req):
        return self._refuse(client, api_key, v, req, _list_offsets_error,
                            self._topics(client, api_key, "DESCRIBE", req.topics))

    def _describe_topics(self, client, api_key, v, req):
        return all(self._topics(client, api_key, "DESCRIBE", req.topics))

    def _metadata(self, client, api_key, v, req):
        return True      # filtered on the way back (filter_metadata); see the module docstring

    def _create_topics(self, client, api_key, v, req):
        if self.authorizer.authorize(client, [Action("CREATE", "CLUSTER", CLUSTER)])[0]:
            return True
        return self._refuse(client, api_key, v, req, _create_topics_error,
                            self._topics(client, api_key, "CREATE", req.topics))

    def _delete_topics(self, client, api_key, v, req):
        topics = req.topics if getattr(req, "topics", None) is not None else [
            _Named(n) for n in getattr(req, "topic_names", ())]
        return self._refuse(client, api_key, v, req, _delete_topics_error,
                            self._topics(client, api_key, "DELETE", topics), topics=topics)

    def _init_producer_id(self, client, api_key, v, req):
        txn = req.transactional_id
        if txn is not None:
            ok = self._all(client, api_key, [Action("WRITE", "TRANSACTIONAL_ID", txn)])
            code = ErrorCode.transactional_id_authorization_failed
        else:
            ok = self.authorizer.authorize(client, [Action("IDEMPOTENT_WRITE", "CLUSTER", CLUSTER)])[0] or \
                self._may_write_some_topic(client)
            code = ErrorCode.cluster_authorization_failed
            if not ok:
                count_denied("InitProducerId", "CLUSTER")
        if ok:
            return True
        return encode_body(_mk(response_class(api_key, v), throttle_time=_ZERO, error_code=code, producer_id=-1,
                               producer_epoch=-1))

    def _may_write_some_topic(self, client: ClientInfo) -> bool:
        """Kafka's authorizeByResourceType(WRITE, TOPIC) for an AclAuthorizer, closely enough:
        some ALLOW WRITE (or ALL) topic pattern for this principal and host whose own name is
        not refused (a DENY covering it wins)."""
        allows = getattr(self.authorizer, "allows", None)
        acls = getattr(self.authorizer, "acls", None)
        if allows is None or acls is None:
            return False
        return any(allows(client.principal, client.host, "WRITE", "TOPIC", b.name) for b in acls.bindings
                   if b.resource_type == "TOPIC" and b.permission == "ALLOW" and b.operation in ("WRITE", "ALL")
                   and b.principal in (client.principal, "User:*") and b.host in (client.host, "*"))

    def _add_partitions_to_txn(self, client, api_key, v, req):
        if v >= 4:
            return self._all(client, api_key, [Action("CLUSTER_ACTION", "CLUSTER", CLUSTER)])
        txn = req.v3_and_below_transactional_id
        if not self._all(client, api_key, [Action("WRITE", "TRANSACTIONAL_ID", txn)]):
            return False
        return all(self._topics(client, api_key, "WRITE", req.v3_and_below_topics))

    def _add_offsets_to_txn(self, client, api_key, v, req):
        if not self._all(client, api_key, [Action("WRITE", "TRANSACTIONAL_ID", req.transactional_id)]):
            code = ErrorCode.transactional_id_authorization_failed
        elif not self._all(client, api_key, [Action("READ", "GROUP", req.group_id)]):
            code = ErrorCode.group_authorization_failed
        else:
            return True
        return encode_body(_mk(response_class(api_key, v), throttle_time=_ZERO, error_code=code))

    def _end_txn(self, client, api_key, v, req):
        if self._all(client, api_key, [Action("WRITE", "TRANSACTIONAL_ID", req.transactional_id)]):
            return True
        return encode_body(_mk(response_class(api_key, v), throttle_time=_ZERO,
                               error_code=ErrorCode.transactional_id_authorization_failed,
                               producer_id=-1, producer_epoch=-1))

    def _describe_transactions(self, client, api_key, v, req):
        return self._all(client, api_key, [Action("DESCRIBE", "TRANSACTIONAL_ID", t) for t in req.transactional_ids])


def _topic_rule(operation: str) -> Callable[..., bool]:
    def rule(gate: ForwardAclGate, client: ClientInfo, api_key: int, v: int, req: Any) -> bool:
        return all(gate._topics(client, api_key, operation, req.topics))
    return rule


def _configs_rule(operation: str) -> Callable[..., bool]:
    def rule(gate: ForwardAclGate, client: ClientInfo, api_key: int, v: int, req: Any) -> bool:
        actions = []
        for r in req.resources:
            rt = _CONFIG_RESOURCE.get(int(r.resource_type))
            if rt is None:
                return False
            actions.append(Action(operation, rt, CLUSTER if rt == "CLUSTER" else r.resource_name))
        return gate._all(client, api_key, actions)
    return rule


@dataclasses.dataclass(frozen=True, slots=True)
class _Named:
    name: str


def _produce_error(cls: Any, req: Any, code: ErrorCode) -> Any:
    mod = __import__(cls.__module__, fromlist=["x"])
    topics = tuple(_mk(mod.TopicProduceResponse, name=getattr(t, "name", None), topic_id=getattr(t, "topic_id", None),
                       partition_responses=tuple(_mk(mod.PartitionProduceResponse, index=p.index, error_code=code,
                                                     base_offset=-1, record_errors=(), error_message=None)
                                                 for p in t.partition_data)) for t in req.topic_data)
    return _mk(cls, responses=topics, throttle_time=_ZERO)


def _fetch_error(cls: Any, req: Any) -> Any:
    mod = __import__(cls.__module__, fromlist=["x"])
    topics = tuple(_mk(mod.FetchableTopicResponse, topic=getattr(t, "topic", None),
                       topic_id=getattr(t, "topic_id", None),
                       partitions=tuple(_mk(mod.PartitionData, partition_index=p.partition,
                                            error_code=ErrorCode.topic_authorization_failed, high_watermark=-1,
                                            # empty, not null: librdkafka refuses a null record set
                                            aborted_transactions=None, records=b"")
                                        for p in t.partitions)) for t in req.topics)
    return _mk(cls, throttle_time=_ZERO, error_code=ErrorCode.none, session_id=0, responses=topics)


def _list_offsets_error(cls: Any, req: Any) -> Any:
    mod = __import__(cls.__module__, fromlist=["x"])
    topics = tuple(_mk(mod.ListOffsetsTopicResponse, name=t.name, partitions=tuple(
        _mk(mod.ListOffsetsPartitionResponse, partition_index=p.partition_index,
            error_code=ErrorCode.topic_authorization_failed, timestamp=-1, offset=-1) for p in t.partitions))
        for t in req.topics)
    return _mk(cls, throttle_time=_ZERO, topics=topics)


def _create_topics_error(cls: Any, req: Any) -> Any:
    mod = __import__(cls.__module__, fromlist=["x"])
    topics = tuple(_mk(mod.CreatableTopicResult, name=t.name, topic_id=_NO_TOPIC_ID,
                       error_code=ErrorCode.topic_authorization_failed, error_message="Authorization failed.",
                       configs=None) for t in req.topics)
    return _mk(cls, throttle_time=_ZERO, topics=topics)


def _delete_topics_error(cls: Any, req: Any, topics: Sequence[Any] = ()) -> Any:
    mod = __import__(cls.__module__, fromlist=["x"])
    results = tuple(_mk(mod.DeletableTopicResult, name=getattr(t, "name", None),
                        topic_id=getattr(t, "topic_id", None) or _NO_TOPIC_ID,
                        error_code=ErrorCode.topic_authorization_failed, error_message=None) for t in topics)
    return _mk(cls, throttle_time=_ZERO, responses=results)


_RULES: dict[int, Callable[..., bool | bytes]] = {
    0: ForwardAclGate._produce, 1: ForwardAclGate._fetch, 2: ForwardAclGate._list_offsets,
    3: ForwardAclGate._metadata, 19: ForwardAclGate._create_topics, 20: ForwardAclGate._delete_topics,
    21: _topic_rule("DELETE"), 22: ForwardAclGate._init_producer_id, 23: _topic_rule("DESCRIBE"),
    24: ForwardAclGate._add_partitions_to_txn, 25: ForwardAclGate._add_offsets_to_txn, 26: ForwardAclGate._end_txn,
    32: _configs_rule("DESCRIBE_CONFIGS"), 33: _configs_rule("ALTER_CONFIGS"), 37: _topic_rule("ALTER"),
    44: _configs_rule("ALTER_CONFIGS"), 61: _topic_rule("READ"),
    65: ForwardAclGate._describe_transactions, 75: ForwardAclGate._describe_topics,
}


def _operations(authorizer: Authorizer, client: ClientInfo, resource_type: str, name: str) -> int:
    """Kafka's AuthorizedOperations bitfield of one resource for this client."""
    ops = SUPPORTED_OPERATIONS[resource_type]
    verdicts = authorizer.authorize(client, [Action(op, resource_type, name) for op in ops])
    return sum(1 << OPERATION_CODES[op] for op, ok in zip(ops, verdicts) if ok)


def filter_metadata(authorizer: Authorizer, client: ClientInfo, response: Any, named: bool) -> Any:
    """A Metadata response as Kafka would answer this client: for a request naming topics,
    each topic it may not DESCRIBE becomes a TOPIC_AUTHORIZATION_FAILED entry without
    partitions; for an all-topics request those topics are left out. For the forwarded
    response path (FORWARD_REWRITE), which owns the decoded response."""
    topics = response.topics
    if not topics:
        return response
    verdicts = authorizer.authorize(client, [Action("DESCRIBE", "TOPIC", t.name or "") for t in topics])
    if all(verdicts):
        return response
    count_denied("Metadata", "TOPIC", verdicts.count(False))
    if not named:
        return dataclasses.replace(response, topics=tuple(t for t, ok in zip(topics, verdicts) if ok))
    return dataclasses.replace(response, topics=tuple(
        t if ok else dataclasses.replace(t, error_code=ErrorCode.topic_authorization_failed, partitions=(),
                                         **({"topic_id": _NO_TOPIC_ID} if hasattr(t, "topic_id") else {}))
        for t, ok in zip(topics, verdicts)))
