"""Security: TLS and SASL on both sides of the gateway, and authorization (issue 13).

Modules:
    settings   the security `--config` names (Kafka's broker names for listeners,
               librdkafka's client names under `upstream.` for kcoord's own connections,
               `authorizer=` and its settings) and secret indirection (`.file`, `.env`)

Rules: this package knows configuration, certificates, SASL exchanges and ACLs. It never
imports the group core, the runtime, the gateway or the service; they import it.
"""
