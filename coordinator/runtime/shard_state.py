"""A shard's states (Kafka's `CoordinatorState`, docs/design/kafka-facts.md §1.1;
the transitions are coordinator_runtime.py's and loader.py's).

- LOADING: replaying the log; group APIs answer COORDINATOR_LOAD_IN_PROGRESS.
- ACTIVE: serving.
- FAILED: a record did not load, or a write failed (loader.py says what happens next).
- UNLOADED: the state topic is gone, or another process fenced the shard; only a load
  brings it back.
- CLOSED: shut down.
Every state but ACTIVE and LOADING answers NOT_COORDINATOR (`withActiveContextOrThrow`).
"""
from __future__ import annotations

import enum


class ShardState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    FAILED = "failed"
    UNLOADED = "unloaded"
    CLOSED = "closed"
