"""Keyed arrays of a forwarded request: one key named twice is refused, never forwarded.

Rules:
- Kafka's generated readers parse every array whose schema gives a ``mapKey`` into an
  ``ImplicitLinkedHashMultiCollection``: an open-addressing table with linear probing that
  keeps duplicates. N entries with one key share one probe run, so reading them costs N**2/2
  probes, plus the same again each time the table doubles (``changeCapacity`` re-seats the
  run). The broker does this in its network thread (``SocketServer`` ``Processor``), before
  any request handler, quota or authorizer. The structured fuzzer's frames that repeat one
  entry up to 30,000 times (AlterReplicaLogDirs ``dirs``, AlterConfigs ``resources``) kept
  both of Kafka 4.4's network threads busy in ``ImplicitLinkedHashCollection.reseat`` for
  more than 70 s, and the broker answered nothing (fuzz/README.md).
- Kafka's clients build these arrays from maps, so they never name a key twice; Kafka's
  handlers refuse duplicates where they look (CreateTopics: "Duplicate topic name.",
  AlterConfigs: a duplicated resource is INVALID_REQUEST). So a request naming one key
  twice in such an array is refused whole (the connection is closed with a log line that
  names the array and the key: Kafka's own answer would come only after the parse that is
  the harm) and never forwarded.
- ``KEYED`` lists the keyed arrays (Kafka 4.4's request schemas, ``mapKey`` fields) of the
  requests kcoord forwards. CreateTopics' and CreatePartitions' ``topics`` are left out:
  their duplicates are answered as Kafka answers them and never forwarded
  (admin_limits.py). Produce's ``topic_data`` is not decoded on its hot path.
"""
from __future__ import annotations

from typing import Any

# A keyed array: (field name, key field names, keyed arrays inside each entry).
Keyed = tuple[str, tuple[str, ...], tuple["Keyed", ...]]

_CONFIGS = ("configs", ("name",), ())
KEYED: dict[int, tuple[Keyed, ...]] = {
    19: (("topics", (), (("assignments", ("partition_index",), ()), _CONFIGS)),),     # CreateTopics
    23: (("topics", ("topic",), ()),),                                               # OffsetForLeaderEpoch
    24: (("v3_and_below_topics", ("name",), ()),                                      # AddPartitionsToTxn
         ("transactions", ("transactional_id",), (("topics", ("name",), ()),))),
    33: (("resources", ("resource_type", "resource_name"), (_CONFIGS,)),),          # AlterConfigs
    34: (("dirs", ("path",), (("topics", ("name",), ()),)),),                        # AlterReplicaLogDirs
    35: (("topics", ("topic",), ()),),                                               # DescribeLogDirs
    43: (("topic_partitions", ("topic",), ()),),                                     # ElectLeaders
    44: (("resources", ("resource_type", "resource_name"),                           # IncrementalAlterConfigs
          (("configs", ("name", "config_operation"), ()),)),),
    57: (("feature_updates", ("feature",), ()),),                                    # UpdateFeatures
    61: (("topics", ("name",), ()),),                                                # DescribeProducers
}


def duplicate_key(api_key: int, request: Any) -> str | None:
    """The first keyed array of ``request`` that names one key twice, as
    'dirs[3].path='/x' is dirs[0]'s', or None."""
    for keyed in KEYED.get(api_key, ()):
        found = _duplicate(request, keyed, "")
        if found is not None:
            return found
    return None


def _duplicate(parent: Any, keyed: Keyed, prefix: str) -> str | None:
    name, key_fields, inner = keyed
    entries = getattr(parent, name, None)
    if not entries:                         # absent in this version, null or empty
        return None
    path = f"{prefix}{name}"
    if key_fields:
        seen: dict[tuple, int] = {}
        for i, entry in enumerate(entries):
            key = tuple(getattr(entry, f) for f in key_fields)
            first = seen.setdefault(key, i)
            if first != i:
                shown = ", ".join(f"{f}={_shown(v)}" for f, v in zip(key_fields, key))
                return f"{path}[{i}] repeats the key of {path}[{first}] ({shown})"
    for i, entry in enumerate(entries):
        for sub in inner:
            found = _duplicate(entry, sub, f"{path}[{i}].")
            if found is not None:
                return found
    return None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else f"{text[:117]}..."
