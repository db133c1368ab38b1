"""`kcoord_client_auth_total{mechanism,outcome}`: client SASL authentications (Kroxylicious's
`kroxylicious_client_auth_total` pattern).

- ``mechanism``: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, GSSAPI, AWS_MSK_IAM, or
  ``other`` (a client chooses the mechanism string: it never becomes a label as it is);
- ``outcome``: ``success`` (the broker, or kcoord when terminating, accepted the client),
  ``failure`` (refused credentials, an unsupported mechanism, an exchange broken off).

Re-authentications (KIP-368) count like first authentications. Children are cached, so a
count is one dict look-up and an increment.
"""
from __future__ import annotations

from prometheus_client import Counter

SUCCESS = "success"
FAILURE = "failure"
OUTCOMES = (SUCCESS, FAILURE)
KNOWN_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI", "AWS_MSK_IAM")
OTHER = "other"

CLIENT_AUTH = Counter("kcoord_client_auth_total", "Client SASL authentications, by mechanism and outcome",
                      ["mechanism", "outcome"])
_CHILDREN = {(m, o): CLIENT_AUTH.labels(mechanism=m, outcome=o) for m in (*KNOWN_MECHANISMS, OTHER)
             for o in OUTCOMES}


def mechanism_label(mechanism: str | None) -> str:
    return mechanism if mechanism in KNOWN_MECHANISMS else OTHER


def record(mechanism: str | None, outcome: str) -> None:
    _CHILDREN[(mechanism_label(mechanism), outcome)].inc()


def count(mechanism: str, outcome: str) -> float:
    """The current value (tests, and `kcoord` diagnostics)."""
    return _CHILDREN[(mechanism_label(mechanism), outcome)]._value.get()
