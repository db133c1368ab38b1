"""A worker library for the `connect` group type (docs/design/connect-groups-spec.md): any Python program
that distributes named connectors and tasks over a group of workers can use it.

Public API:
- `members.connect.worker.ConnectWorker`: the worker state machine, sans-IO. It builds
  ConnectGroupHeartbeat requests (32703), reads the answers and tells the application what
  to do: `Revoke` units, then `Assign` units (never both at once, revoke first), `Lost`
  when fenced (then it rejoins), `Compute` when the coordinator asks it to assign the
  group (then `prepare_request()` / `on_prepare()` / `on_install()`).
- `members.connect.assignor.IncrementalCooperativeAssignor`: Connect's documented
  incremental cooperative behaviour (KIP-415), written from the KIP: sticky, balanced,
  with a departed worker's units held for `scheduled.rebalance.max.delay.ms` and then
  reassigned.
- `members.connect.driver.ConnectDriver`: the asyncio driver (sockets and clock) around a
  `ConnectWorker`, with a `WorkerListener` for the application's start/stop callbacks.
- A unit is `(connector, task)`, task -1 being the connector itself (Connect's
  `CONNECTOR_TASK`).

Depends on coordinator.protocol.connect_messages (the wire) only, never on the
coordinator's core.
"""
