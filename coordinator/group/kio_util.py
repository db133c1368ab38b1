"""Version-generic construction of kio messages, as the group core's handlers name it: the
protocol layer's builder (coordinator/protocol/kio_build.py), one copy for both.

kio generates one dataclass module per API version. Handlers build the response from one
superset of keyword arguments; `build` keeps the fields that exist at the request's
version, so version differences live in kio's schemas, not in handlers.
"""
from __future__ import annotations

from ..protocol.kio_build import build, schema

__all__ = ["build", "schema"]
