"""The connect group type (docs/design/connect-groups-spec.md): model, records and their
replay, ConnectGroupHeartbeat, client-side assignment, describe, timers, and its row in the
group-type registry.
"""
