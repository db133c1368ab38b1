"""The state topic belongs to kcoord, as ``__consumer_offsets`` belongs to Kafka.

Rules for requests forwarded through the gateway (matched by name, and by topic id where
the request carries ids: Produce v13, DeleteTopics v6):
- Produce and DeleteRecords: each state-topic partition gets INVALID_TOPIC_EXCEPTION (17)
  with Kafka's messages (ReplicaManager: "Cannot append to internal topic X", "Cannot
  delete records of internal topic X"; DeleteRecords has no message field, so it is
  logged). Kafka appends the other partitions of the same request; so does the gateway:
  a request naming only the state topic is answered here, a mixed one is SPLIT: the
  state-topic entries are cut out of the request, the rest is forwarded, and the refused
  entries are added to upstream's answer. A Produce is decoded only when its bytes hold
  the state topic's name or id, or a refused batch (see ``produce``). A Produce with acks=0
  that names it closes the connection, as Kafka closes it when an acks=0 produce fails (the
  client gets no response to read an error from).
- DeleteTopics, CreatePartitions, and CreateTopics of its name while it does not exist:
  TOPIC_AUTHORIZATION_FAILED (29) for that topic, the rest forwarded the same way. A
  deliberate difference: Kafka only checks ACLs there. Kafka's ``__admin_client``
  exception for internal topics is not copied.
- AlterConfigs, IncrementalAlterConfigs, AlterPartitionReassignments on it stay allowed
  (as for ``__consumer_offsets``) and are logged with the client.
- The same answers carry the other refusals of forwarded requests, after the state
  topic's: each Produce partition's record batch (produce_check.py; the split is per
  partition), Kafka's controller limits and the operator's safeguards on CreateTopics,
  CreatePartitions, DeleteTopics and the config APIs (admin_policy.py decides), and the
  10,000-record caps of the other admin writes (admin_limits.record_cap). A whole-request
  refusal answers every entry; a per-entry one joins the state-topic refusals in the same
  split. ``rule`` names the rule (metric label) when it is not the state topic's.
A decision is None (forward the frame unchanged: the common case), or one of
``Local(response)``, ``Split(frame, merge)``, ``Close(reason)``; ``note`` says what was
refused, for the connection's log line.
"""
from __future__ import annotations

import dataclasses
import sys
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from ..protocol.apis import (
    ALTER_CONFIGS,
    ALTER_PARTITION_REASSIGNMENTS,
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_RECORDS,
    DELETE_TOPICS,
    INCREMENTAL_ALTER_CONFIGS,
    PRODUCE,
    api_name,
    request_class,
    response_class,
)
from ..protocol.checked import _STRUCTS as _STEPS
from ..protocol.checked import Malformed, struct_step
from ..protocol.codec import BodyError, decode_body, decode_response_frame, encode_body, encode_response_frame
from ..protocol.framing import SIZE, HeaderError
from ..protocol.produce import FIRST_FLEXIBLE, FIRST_TOPIC_ID, produce_acks
from .admin_limits import CAPPED_APIS, ClusterFacts, record_cap, shown
from .admin_limits import RULE_RECORDS as RULE_ADMIN_RECORDS
from .admin_policy import Policy, Verdict, judge, judge_configs
from .produce_check import (
    RULE_RECORDS,
    UNDECIDED,
    RecordChecks,
    check_names,
    refused_partitions,
)
from .safeguards import Safeguards

TOPIC_RESOURCE = 2                 # ConfigResource.Type.TOPIC
UPDATE_FEATURES = 57
DESCRIBE_CONFIGS, LIST_CONFIG_RESOURCES = 32, 74

REFUSING_APIS = frozenset({DELETE_RECORDS, DELETE_TOPICS, CREATE_PARTITIONS, CREATE_TOPICS})
WATCHED_APIS = frozenset({ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS, ALTER_PARTITION_REASSIGNMENTS})
# UpdateFeatures: kcoord's group-type features are refused or taken out (feature_updates.py).
GUARDED_APIS = REFUSING_APIS | WATCHED_APIS | CAPPED_APIS | {UPDATE_FEATURES}
# DescribeConfigs and ListConfigResources: decoded for their GROUP resources, which kcoord serves
# (group_configs.py); AlterConfigs and IncrementalAlterConfigs are decoded already.
GUARDED_APIS = GUARDED_APIS | {DESCRIBE_CONFIGS, LIST_CONFIG_RESOURCES}
# Judged by admin_policy.py too (Kafka's limits, the safeguards), given the metadata view.
SIZED_APIS = frozenset({CREATE_TOPICS, CREATE_PARTITIONS, DELETE_TOPICS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS})

# Metric label values (fixed).
METRIC_API = {PRODUCE: "produce", DELETE_RECORDS: "delete_records", DELETE_TOPICS: "delete_topics",
              CREATE_PARTITIONS: "create_partitions", CREATE_TOPICS: "create_topics",
              ALTER_CONFIGS: "alter_configs", INCREMENTAL_ALTER_CONFIGS: "incremental_alter_configs",
              ALTER_PARTITION_REASSIGNMENTS: "alter_partition_reassignments", 30: "create_acls",
              49: "alter_client_quotas", UPDATE_FEATURES: "update_features"}

_ZERO = timedelta(0)
_ZERO_UUID = uuid.UUID(int=0)


@dataclasses.dataclass(frozen=True, slots=True)
class Local:
    response: Any          # kio response answered here
    note: str
    rule: str = ""         # "": the state topic; else the size rule (admin_limits.RULE_*)


@dataclasses.dataclass(frozen=True, slots=True)
class Split:
    frame: bytes                         # the request without the state-topic entries
    merge: Callable[[bytes], bytes]      # upstream's framed answer -> the client's
    note: str
    rule: str = ""                       # as Local.rule


@dataclasses.dataclass(frozen=True, slots=True)
class Close:
    reason: str


@dataclasses.dataclass(frozen=True, slots=True)
class Allowed:
    note: str              # forwarded unchanged, but logged


def _make(cls: type, **fields: Any) -> Any:
    """An instance of a kio class at some version, setting only the fields it has."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in fields.items() if k in names})


def _module(api_key: int, version: int) -> Any:
    return sys.modules[response_class(api_key, version).__module__]


def _merger(api_key: int, version: int, field: str, extra: tuple[Any, ...],
            throttle: timedelta = _ZERO) -> Callable[[bytes], bytes]:
    def merge(frame: bytes) -> bytes:
        correlation_id, response = decode_response_frame(api_key, version, frame)
        changes: dict[str, Any] = {field: tuple(getattr(response, field)) + extra}
        if throttle > response.throttle_time:     # a quota refusal's wait, when longer than upstream's
            changes["throttle_time"] = throttle
        merged = dataclasses.replace(response, **changes)
        return encode_response_frame(api_key, version, correlation_id, merged)
    return merge


def _topic_label(topic: Any) -> str:
    return str(getattr(topic, "name", None) or getattr(topic, "topic_id", ""))


def _split_produce(request: Any, version: int, refused: dict[tuple[int, int], tuple[int, str]], frame: bytes,
                   body_offset: int, note: str, rule: str) -> Local | Split:
    """The Produce without the refused partitions (a topic left with none is dropped),
    header unchanged, and the merge that puts their answers into upstream's: into the
    answer's entry for the same topic, or a new entry."""
    m = _module(PRODUCE, version)
    leader = m.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1) if hasattr(m, "LeaderIdAndEpoch") else None
    by_id = version >= FIRST_TOPIC_ID
    answers: dict[int, list[Any]] = {}
    kept_topics = []
    for t, topic in enumerate(request.topic_data):
        kept = []
        for p, partition in enumerate(topic.partition_data):
            error = refused.get((t, p))
            if error is None:
                kept.append(partition)
                continue
            answers.setdefault(t, []).append(_make(
                m.PartitionProduceResponse, index=partition.index, error_code=error[0], base_offset=-1,
                log_append_time=None, log_start_offset=-1, record_errors=(), error_message=error[1],
                current_leader=leader))
        if kept:
            kept_topics.append(dataclasses.replace(topic, partition_data=tuple(kept)))
    entries = tuple(_make(m.TopicProduceResponse, name=getattr(request.topic_data[t], "name", None),
                          topic_id=getattr(request.topic_data[t], "topic_id", None) if by_id else None,
                          partition_responses=tuple(parts))
                    for t, parts in answers.items())
    if not kept_topics:
        return Local(_make(response_class(PRODUCE, version), responses=entries, throttle_time=_ZERO,
                           node_endpoints=()), note, rule)

    def key(entry: Any) -> Any:
        return entry.topic_id if by_id else entry.name

    def merge(answer: bytes) -> bytes:
        correlation_id, response = decode_response_frame(PRODUCE, version, answer)
        merged = list(response.responses)
        at = {key(e): i for i, e in enumerate(merged)}
        for entry in entries:
            i = at.get(key(entry))
            if i is None:
                merged.append(entry)
            else:
                merged[i] = dataclasses.replace(merged[i], partition_responses=tuple(
                    merged[i].partition_responses) + entry.partition_responses)
        return encode_response_frame(PRODUCE, version, correlation_id,
                                     dataclasses.replace(response, responses=tuple(merged)))
    payload = bytes(frame[4:body_offset]) + encode_body(dataclasses.replace(request, topic_data=tuple(kept_topics)))
    return Split(SIZE.pack(len(payload)) + payload, merge, note, rule)


class StateTopicGuard:
    def __init__(self, name: str, topic_id: Callable[[], uuid.UUID | None], exists: Callable[[], bool],
                 max_walked_frame: int = 2**31 - 1) -> None:
        self.name = name
        self._name_bytes = name.encode()
        self._topic_id = topic_id
        self._exists = exists
        # A Produce frame (size prefix included) above this is not walked: see ``produce``.
        self.max_walked_frame = max_walked_frame
        self._id_cache: tuple[uuid.UUID | None, bytes | None] = (None, None)
        # The Produce record checks (produce_check.py), set by the first connection that
        # knows the upstream (guarded.py); shared by every connection.
        self.record_checks: RecordChecks | None = UNDECIDED
        # The operator's safeguards (safeguards.py), built at the gateway's start (gateway.py).
        self.safeguards: Safeguards | None = None

    def _topic_id_bytes(self) -> bytes | None:
        """The state topic id's 16 bytes, computed once per id (Produce v13 is hot)."""
        topic_id = self._topic_id()
        cached = self._id_cache
        if topic_id is not cached[0]:
            cached = self._id_cache = (topic_id, None if topic_id is None else topic_id.bytes)
        return cached[1]

    def _is_state(self, key: str | uuid.UUID | None) -> bool:
        if key.__class__ is str:
            return key == self.name
        if key is None:
            return False
        return key != _ZERO_UUID and key == self._topic_id()

    # --- Produce (hot: walked, decoded only when the state topic may be named) ---------

    def produce(self, frame: bytes, version: int, body_offset: int,
                checks: RecordChecks | None = None) -> tuple[int, Local | Split | Close | None]:
        """(acks, decision) of a framed Produce; raises BodyError if it does not parse.

        Every Produce up to ``max_walked_frame`` is walked with its bounds checked (records
        skipped by length, never decoded), and with ``checks`` each partition's record
        batch is checked (produce_check.py). Only a frame holding the state topic's name or
        id bytes anywhere, or a refused batch, is decoded: a byte search in C costs next to
        nothing, and the decode is the rare path.

        A larger Produce (above max_decoded_request_bytes, kcoord's own setting) is read
        first within produce_check.MAX_NAMED_PARTITIONS topics, partitions and tagged
        fields, then walked: the walk runs on the event loop, linear in them, and one
        socket.request.max.bytes frame of tiny partitions would stall every client for
        seconds. Over the bound, or not fitting its frame, it is refused whole (the
        connection is closed): nothing goes up unwalked, where a body no Kafka reader takes
        has killed Tansu (docs/measurements/hostile-input.md). It is never decoded (its
        decode holds ~3 times the frame): one with a refused batch, or with the state
        topic's name or id in its bytes, closes the connection (a Produce above the bound
        needs a max.request.size above Kafka producers' 1 MiB default).

        Refusals are per partition, in Kafka's order: a state-topic partition gets
        INVALID_TOPIC_EXCEPTION (ReplicaManager refuses internal topics before it validates
        records), another partition its batch error. With acks=0 any refusal closes the
        connection, as Kafka closes it when an acks=0 produce fails.
        """
        cls = request_class(PRODUCE, version)

        def walk() -> None:
            try:
                (_STEPS.get(cls) or struct_step(cls))(frame, body_offset, len(frame))
            except Malformed as e:
                raise BodyError(f"{cls.__name__} v{version}: {e}") from None
        walked = len(frame) <= self.max_walked_frame
        if walked:
            walk()
        try:
            _, acks = produce_acks(frame, body_offset, version >= FIRST_FLEXIBLE)
        except HeaderError as e:   # cannot happen after the walk; kept as a parse error
            raise BodyError(f"{cls.__name__} v{version}: {e}") from None
        bad = None
        if checks is not None:
            bad = refused_partitions(frame, body_offset, version, checks, walked)
        else:   # record checks off: names are still Kafka's parse cost (produce_check.py); one topic: 0.31 µs
            check_names(frame, body_offset, version, walked)
        if not walked:
            walk()      # read within the bound above: its topics and partitions are few enough
        id_bytes = self._topic_id_bytes() if version >= FIRST_TOPIC_ID else None
        named = self._name_bytes in frame or (id_bytes is not None and id_bytes in frame)
        if not named and bad is None:
            return acks, None
        if not walked:     # a decode of up to socket.request.max.bytes holds ~3 times the frame
            why = "a batch Kafka would refuse" if bad is not None else "the state topic's name or id in its bytes"
            return acks, Close(f"Produce of {len(frame) - 4:,} bytes, above max_decoded_request_bytes="
                               f"{self.max_walked_frame - 4:,}, has {why}: answering per partition would decode "
                               f"it, which kcoord does not do at that size")
        request = decode_body(cls, frame, body_offset)
        topics = request.topic_data
        state = {i for i, t in enumerate(topics)
                 if named and self._is_state(t.topic_id if version >= FIRST_TOPIC_ID else t.name)}
        internal = f"Cannot append to internal topic {self.name}"
        refused: dict[tuple[int, int], tuple[int, str]] = {
            (t, p): (ErrorCode.invalid_topic_exception, internal)
            for t in sorted(state) for p in range(len(topics[t].partition_data))}
        for (t, p), error in (bad or {}).items():
            if t not in state:
                refused[t, p] = (ErrorCode(error[0]), f"{error[1]} (topic {shown(_topic_label(topics[t]))}, partition "
                                                      f"{topics[t].partition_data[p].index})")
        if not refused:
            return acks, None
        rule = "" if not bad else RULE_RECORDS
        note = "; ".join(sorted({m for _, m in refused.values()}))[:500] + f" ({len(refused)} partition(s))"
        if acks == 0:
            return 0, Close(f"acks=0 Produce refused ({note}): Kafka closes the connection when an acks=0 "
                            f"produce fails (the client gets no response to read an error from)")
        return acks, _split_produce(request, version, refused, frame, body_offset, note, rule)

    # --- admin APIs (decoded with the bounded kio codec) ------------------------------

    def admin(self, api_key: int, version: int, request: Any, frame: bytes, body_offset: int,
              facts: ClusterFacts | None = None, policy: Policy | None = None) -> Local | Split | Allowed | None:
        """The decision for a decoded admin request. With ``facts`` (the metadata view) and
        ``policy`` (the client's safeguards), CreateTopics, CreatePartitions, DeleteTopics
        and the config APIs also get the verdict of admin_policy.py, after the state-topic
        refusal (an authorization refusal: Kafka filters those out first)."""
        if api_key in CAPPED_APIS:
            capped = record_cap(api_key, response_class(api_key, version), request)
            if capped is not None:
                return Local(capped[0], capped[1], RULE_ADMIN_RECORDS)
        if api_key in WATCHED_APIS:
            verdict = judge_configs(api_key, request, policy)
            if verdict is None:
                return self._watched(api_key, request)
            return self._decide(api_key, version, request, frame, body_offset, request.resources, "resources", [],
                                verdict)
        if api_key not in REFUSING_APIS:
            return None
        if api_key == DELETE_TOPICS and version < 6:
            items, field = request.topic_names, "topic_names"
            refused = [i for i, n in enumerate(items) if n == self.name]
        else:
            items, field = request.topics, "topics"
            if api_key == DELETE_TOPICS:
                refused = [i for i, t in enumerate(items)
                           if t.name == self.name or self._is_state(getattr(t, "topic_id", None))]
            elif api_key == CREATE_TOPICS:
                refused = [i for i, t in enumerate(items) if t.name == self.name] if not self._exists() else []
            else:
                refused = [i for i, t in enumerate(items) if t.name == self.name]
        verdict = judge(api_key, version, request, refused, facts, policy) if api_key != DELETE_RECORDS else None
        if not refused and verdict is None:
            return None
        return self._decide(api_key, version, request, frame, body_offset, items, field, refused, verdict)

    def _decide(self, api_key: int, version: int, request: Any, frame: bytes, body_offset: int, items: Any,
                field: str, refused: list[int], verdict: Verdict | None) -> Local | Split:
        """The answer: every entry refused here (Local), or the rest forwarded (Split)."""
        m = _module(api_key, version)
        cls = response_class(api_key, version)
        if verdict is not None and verdict.whole is not None:
            # Kafka answers every entry of the request with the controller's error.
            code, message = verdict.whole
            results, response_field = self._answers(api_key, m, [(t, code, message) for t in items])
            return Local(_make(cls, throttle_time=_ZERO, **{response_field: results}), message, verdict.rule)
        results, response_field, note = self._refusals(api_key, m, [items[i] for i in refused])
        rule, throttle = "", _ZERO
        if verdict is not None and verdict.throttle_ms and not verdict.entries:
            # Accepted, but the client's mutation quota is in debt (safeguards.py): upstream's
            # answer carries the throttle time.
            rule, throttle = verdict.rule, timedelta(milliseconds=verdict.throttle_ms)
            note = "; ".join(filter(None, (note, f"throttled {verdict.throttle_ms} ms")))
            response_field = response_field or self._answers(api_key, m, [])[1]
        if verdict is not None and verdict.entries:
            extra, response_field = self._answers(api_key, m, [
                (items[i], code, message) for i, (code, message) in sorted(verdict.entries.items())])
            results += extra
            refused = sorted({*refused, *verdict.entries})
            note = "; ".join(filter(None, (note, f"{len(extra)} entries refused: "
                                           + next(iter(verdict.entries.values()))[1])))
            rule, throttle = verdict.rule, timedelta(milliseconds=verdict.throttle_ms)
        if len(refused) == len(items):
            return Local(_make(cls, throttle_time=throttle, **{response_field: results}), note, rule)
        return self._split(request, field, refused, frame, body_offset,
                           _merger(api_key, version, response_field, results, throttle), note, rule)

    @staticmethod
    def _split(request: Any, field: str, refused: list[int], frame: bytes, body_offset: int,
               merge: Callable[[bytes], bytes], note: str, rule: str = "") -> Split:
        """The request without the refused entries of ``field``, header (and correlation id)
        unchanged, to forward; ``merge`` adds the refusals to upstream's answer."""
        dropped = set(refused)
        kept = tuple(x for i, x in enumerate(getattr(request, field)) if i not in dropped)
        payload = bytes(frame[4:body_offset]) + encode_body(dataclasses.replace(request, **{field: kept}))
        return Split(SIZE.pack(len(payload)) + payload, merge, note, rule)

    def _refusals(self, api_key: int, m: Any, refused: list[Any]) -> tuple[tuple[Any, ...], str, str]:
        name = self.name
        if not refused:
            return (), "", ""
        if api_key == DELETE_RECORDS:
            message = f"Cannot delete records of internal topic {name}"
            return (tuple(m.DeleteRecordsTopicResult(name=name, partitions=tuple(
                m.DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=-1,
                                               error_code=ErrorCode.invalid_topic_exception)
                for p in t.partitions)) for t in refused), "topics", message)
        what = {DELETE_TOPICS: "deleted", CREATE_PARTITIONS: "given partitions", CREATE_TOPICS: "created"}[api_key]
        message = (f"Topic {name} is the kcoord group coordinator's state topic: it cannot be {what} "
                   f"through the gateway")
        results, field = self._answers(api_key, m, [(t, ErrorCode.topic_authorization_failed, message)
                                                    for t in refused])
        return results, field, message if refused else ""

    @staticmethod
    def _answers(api_key: int, m: Any, entries: list[tuple[Any, ErrorCode, str]]) -> tuple[tuple[Any, ...], str]:
        """Per-topic results of DeleteTopics, CreatePartitions or CreateTopics answered here:
        (results, the response field that holds them)."""
        if api_key == DELETE_TOPICS:
            return tuple(
                _make(m.DeletableTopicResult, name=t if isinstance(t, str) else t.name,
                      topic_id=None if isinstance(t, str) else t.topic_id,
                      error_code=code, error_message=message)
                for t, code, message in entries), "responses"
        if api_key == CREATE_PARTITIONS:
            return tuple(m.CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=message)
                         for t, code, message in entries), "results"
        if api_key in (ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS):
            return tuple(m.AlterConfigsResourceResponse(error_code=code, error_message=message,
                                                        resource_type=r.resource_type, resource_name=r.resource_name)
                         for r, code, message in entries), "responses"
        return tuple(_make(m.CreatableTopicResult, name=t.name, topic_id=_ZERO_UUID, error_code=code,
                           error_message=message, topic_config_error_code=0, num_partitions=-1,
                           replication_factor=-1, configs=None)
                     for t, code, message in entries), "topics"

    def _watched(self, api_key: int, request: Any) -> Allowed | None:
        if api_key == ALTER_PARTITION_REASSIGNMENTS:
            hit = any(t.name == self.name for t in request.topics)
        else:
            hit = any(int(r.resource_type) == TOPIC_RESOURCE and r.resource_name == self.name
                      for r in request.resources)
        return Allowed(f"{api_name(api_key)} on the state topic {self.name} (allowed, as for "
                       f"__consumer_offsets)") if hit else None
