"""Listener metrics: connections by listener and protocol, failed TLS handshakes.

- `kcoord_gateway_connections{listener,protocol}` (gauge): client connections open now,
  admitted past the connection limits, by Kafka listener name (`PLAINTEXT`, `SSL`,
  `INTERNAL`, ...: one value for a listener's bootstrap and per-broker ports together) and
  security protocol.
- `kcoord_tls_handshake_failures_total{listener}` (counter): TLS handshakes that failed
  (bad or missing client certificate, a client speaking plaintext or an unsupported
  version, a timeout) or whose client certificate no `ssl.principal.mapping.rules` rule
  maps; the connection is closed.
- `kcoord_tls_reloads_total{listener,outcome}` (counter): certificate reloads, `ok` or
  `failed` (the listener keeps its previous certificates).
"""
from __future__ import annotations

from prometheus_client import Counter, Gauge

CONNECTIONS = Gauge("kcoord_gateway_connections", "Client connections open now, by listener and security protocol",
                    ["listener", "protocol"])
TLS_HANDSHAKE_FAILURES = Counter("kcoord_tls_handshake_failures_total",
                                 "TLS handshakes with clients that failed, timed out or mapped to no principal",
                                 ["listener"])
TLS_RELOADS = Counter("kcoord_tls_reloads_total", "Listener certificate reloads by outcome (ok, failed)",
                      ["listener", "outcome"])
