"""The group coordinator service: what the gateway calls for every group API, cut into the
parts Kafka's group coordinator and KafkaApis divide the job into.

Rules of this package:
- wiring.py composes the parts (`GroupCoordinatorService`) and owns the one door, `handle`.
  Each part gets its collaborators explicitly, never the whole service; the parts import
  each other only downwards: wiring > authorization, group_apis, lifecycle, envelope,
  streams_apis > topic_checks, transactions, group_configs, streams_topics > routing,
  group_config_peers, partitioner > apis, skip_list (import-linter checks it, pyproject.toml).
- apis.py is the API registry: the rows of the API table (coordinator/protocol/api_table.py,
  one `ApiSpec` per API), each bound to the part that serves it. wiring.py builds the table
  from the core rows and the enabled extensions' rows.
- authorization.py is Kafka's KafkaApis stage around the handlers (group, transactional id,
  then topic-level checks in topic_checks.py); with ALLOW_ALL it is never entered.
- routing.py maps a group to its shard (Kafka's `abs(javaHash(groupId)) % partitions`) and
  splits multi-group requests by shard; group_apis.py holds one handler per group API, and
  turns shard-level failures (loading, not active, write failed) into the per-API error
  Kafka would send.
- lifecycle.py loads, reloads and unloads the shards, and takes and releases them in
  cluster mode; a shard that does not load fails alone (docs/user/reliability.md).
- transactions.py serves TxnOffsetCommit and AddOffsetsToTxn (docs/design/transactions.md).
- streams_apis.py serves the streams group APIs (88, 89, 93) as an extension's rows, with
  Kafka's KafkaApis checks; streams_topics.py creates a topology's internal topics upstream,
  only with the member's CREATE right (docs/user/streams-groups.md).
- group_configs.py serves the per-group configuration on GROUP resources; in a kcoord cluster
  group_config_peers.py sends the groups of other instances' shards to their owners, in an
  Envelope that envelope.py checks and opens on the owner (docs/user/group-configs.md).
- partitioner.py decides, once per process, how groups map to state-topic partitions: Kafka's
  `Utils.abs(hashCode) % n`, or the legacy mask on a state topic written before
  (docs/design/kafka-facts.md).
- skip_list.py parses `state.load.skip.corrupt.offsets`, the operator's explicit way past a
  bad record.
"""
from __future__ import annotations

from .skip_list import SkipOffsetsError, parse_skip_offsets
from .topic_checks import TOPIC_DESCRIBE_REFUSED
from .wiring import GroupCoordinatorService, enabled_extensions

__all__ = [
    "TOPIC_DESCRIBE_REFUSED",
    "GroupCoordinatorService",
    "SkipOffsetsError",
    "enabled_extensions",
    "parse_skip_offsets",
]
