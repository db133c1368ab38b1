"""kcoord's KIP-848 member library: a consumer group member for Python, sans-IO.

Public API:
- `members.consumer.ConsumerMember`: the KIP-848 member state machine. It builds the
  heartbeat requests (ConsumerGroupHeartbeat, key 68, or the client-assignor variant 32700
  when it brings `PartitionAssignor`s), reads the responses, and tells the application
  what to do (`Revoke`, `Assign`, `Lost`, `Fatal`) in KIP-848's order: revoke before
  assign, acknowledge by heartbeat, rejoin after fencing. It does no I/O and reads no
  clock: the caller passes `now_ms` and sends the bytes.
- `members.assignor.PartitionAssignor`: the client-side assignor interface of the client-side assignor spec
  (name, version range, metadata, `assign(group) -> assignment`, `on_assignment`).
- `members.sticky.StickyAssignor`: a sample assignor with versioned metadata.

The library depends on kio's message classes and on coordinator.protocol.private_messages
(the private wire), never on the coordinator's core.
"""
