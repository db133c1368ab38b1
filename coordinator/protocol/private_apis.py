"""kcoord's private API block: keys, error codes and record tags no Kafka release uses.

Rules of this module (docs/design/client-assignors-spec.md §0, "Proposed kcoord-private allocation"):
- Private API keys live in 32700-32767, private error codes in 32700-32767, private
  tagged-field tags from 1000. Kafka 4.3 uses API keys 0-92, error codes -1..133 and
  record types 0-23 (24 in trunk); it grows by a handful of keys a year, so the top of
  the int16 range stays clear for decades. tests/unit/protocol/test_private_apis.py reads
  the kafka-clients jars and fails the day a release reaches the block.
- Key 68 (ConsumerGroupHeartbeat) is never changed: a future Kafka client that knows
  Kafka's own next version would pick it and send a different body. The client-assignor
  heartbeat is a different key (32700) instead.
- Real clients are safe with the block advertised: Java's NodeApiVersions parks unknown
  keys in `unknownApis`, librdkafka prints "Unknown-32700?", franz-go skips keys above
  its MaxKey, kafka-python and aiokafka keep dicts.
- Allocated, by docs/design/client-assignors-spec.md §0: 32700-32702 (client assignors, this module), 32703-32706
  (the connect group of the connect group spec, connect_messages.py). Errors 32700 COMPUTE_ASSIGNMENT,
  32701 INVALID_ASSIGNMENT.
"""
from __future__ import annotations

from . import connect_messages
from .private_messages import (
    NAMES,
    REQUESTS,
    RESPONSES,
)

PRIVATE_KEY_BLOCK = range(32700, 32768)
PRIVATE_ERROR_BLOCK = range(32700, 32768)
PRIVATE_TAG_BASE = 1000

# the connect group spec's connect-group keys (docs/design/client-assignors-spec.md §0; connect_messages.py).
CONNECT_GROUP_HEARTBEAT = connect_messages.CONNECT_GROUP_HEARTBEAT
CONNECT_GROUP_PREPARE_ASSIGNMENT = connect_messages.CONNECT_GROUP_PREPARE_ASSIGNMENT
CONNECT_GROUP_INSTALL_ASSIGNMENT = connect_messages.CONNECT_GROUP_INSTALL_ASSIGNMENT
CONNECT_GROUP_DESCRIBE = connect_messages.CONNECT_GROUP_DESCRIBE

# Informational (docs/design/client-assignors-spec.md §2, §7 #12): the heartbeat was processed in full, and
# this member is asked to compute the group's assignment (Prepare, then Install).
COMPUTE_ASSIGNMENT = 32700
# The Install does not fit the prepared snapshot (docs/design/client-assignors-spec.md); the message says
# which invariant failed.
INVALID_ASSIGNMENT = 32701

CLIENT_ASSIGNOR_APIS: dict[int, str] = dict(NAMES)
CONNECT_APIS: dict[int, str] = dict(connect_messages.NAMES)
ALL_PRIVATE_KEYS = frozenset(CLIENT_ASSIGNOR_APIS) | {
    CONNECT_GROUP_HEARTBEAT, CONNECT_GROUP_PREPARE_ASSIGNMENT, CONNECT_GROUP_INSTALL_ASSIGNMENT,
    CONNECT_GROUP_DESCRIBE}
PRIVATE_ERRORS: dict[int, str] = {COMPUTE_ASSIGNMENT: "COMPUTE_ASSIGNMENT", INVALID_ASSIGNMENT: "INVALID_ASSIGNMENT"}


def private_classes(api_key: int) -> tuple[type, type] | None:
    """The request and response classes of a private API (all v0, flexible from v0), which
    `apis.api_schemas` serves like kio's; None outside the built ones. Classes, not
    `apis.ApiSchemas`: apis.py imports this module, never the reverse."""
    for requests, responses in ((REQUESTS, RESPONSES), (connect_messages.REQUESTS, connect_messages.RESPONSES)):
        request = requests.get(api_key)
        if request is not None:
            return request, responses[api_key]
    return None


def private_name(api_key: int) -> str | None:
    return CLIENT_ASSIGNOR_APIS.get(api_key) or CONNECT_APIS.get(api_key)
