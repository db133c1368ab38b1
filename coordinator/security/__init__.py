"""Security: TLS and SASL on both sides of the gateway, and authorization.

Modules:
    settings          the security `--config` names (Kafka's broker names for listeners,
                      librdkafka's client names under `upstream.` for kcoord's own connections,
                      `authorizer=` and its settings) and secret indirection (`.file`, `.env`)
    tls               server TLS of the listeners (KIP-651 PEM, mTLS), reloaded on change
    principal_mapping Kafka's `ssl.principal.mapping.rules` over a certificate subject
    listener_metrics  connections by listener and protocol, TLS handshake failures, reloads
    upstream          kcoord's own upstream TLS/SASL (librdkafka names under `upstream.`)
    sasl_client       the SASL client of kcoord's own links (PLAIN, SCRAM, OAUTHBEARER)
    sasl_inspect      what a passed-through SASL exchange says about the client's principal
    sasl_server       SASL termination: PLAIN and SCRAM against a credential file
    auth_metrics      kcoord_client_auth_total{mechanism,outcome}
    acl               Kafka's ACL model and verdicts (AclAuthorizer, with a verdict cache)
    acl_sources       where the ACLs come from: authorizer=file|upstream|none
    forward_acl       kcoord's own check of forwarded requests (mTLS, SASL termination)
    audit             the audit log of group mutations
    metrics           authorization denials by API and resource type

Rules: this package knows configuration, certificates, SASL exchanges and ACLs. It never
imports the group core, the runtime, the gateway or the service; they import it.
"""
