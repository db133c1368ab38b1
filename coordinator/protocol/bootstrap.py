"""An upstream's bootstrap list, 'host:port,host:port', as kcoord's link opener takes it.

Rules of this module:
- The one parser of the `--upstream`/bootstrap text that kcoord's own links start from
  (upstream/client.py's opener, the ACL mirror in security/acl_sources.py, the state topic
  and the fenced log): it sits on the protocol floor so that every floor above may import it
  (pyproject.toml's import-linter layers).
- Each comma-separated entry is split at its last ':' (so '[::1]:9092' keeps its host) and
  stripped of surrounding white space; a port that is not a number raises ValueError.
"""
from __future__ import annotations


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    """'host:port,host:port' -> [(host, port), ...]: an upstream's bootstrap list."""
    return [(h, int(port)) for h, _, port in (a.strip().rpartition(":") for a in bootstrap.split(","))]
