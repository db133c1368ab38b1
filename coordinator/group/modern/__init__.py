"""The modern group types, those whose members heartbeat with epochs towards a target
assignment (Kafka: `group/modern/`): consumer groups (KIP-848, consumer/) and connect groups
(docs/design/connect-groups-spec.md, connect/). What both use lives at this level: the
reconciliation builder and the client-side assignment engine.

Rule: consumer/ and connect/ never import each other; what they share moves here.
"""
