"""The service's API registry: the rows of its API table (coordinator/protocol/api_table.py),
each bound to the part that serves it.

Rules of this module:
- The registry is filled from one table, built by the wiring from the core rows and the
  enabled extensions' rows (`ApiRegistry(table, resolve)`); it says what ApiVersions
  advertises (`api_versions`), what is answered (`answered_versions`), by which bound handler,
  and under which metric name (the row's name). The gateway reads `api_versions` and
  `answered_versions` once, at its start: every API is registered before that.
- An API registered twice is a programming error, refused at once.
- Every other fact about an API (its error response, its group and topic checks, its shard
  operation) is read from its row (`apis[api_key]`), never from a table of its own.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from ..protocol.api_table import ApiSpec

Handler = Callable[[Any, Any], Awaitable[Any]]


class ApiRegistry:
    """The served APIs: their rows (`apis`), what ApiVersions advertises (`api_versions`),
    what is answered (`answered_versions`), the bound handler and the metric name of each key."""

    def __init__(self, rows: Iterable[ApiSpec], resolve: Callable[[ApiSpec], Handler]) -> None:
        self._resolve = resolve       # a row's handler, bound to the part that serves it
        self.apis: dict[int, ApiSpec] = {}
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.answered_versions: dict[int, tuple[int, int]] = {}
        self.handlers: dict[int, Handler] = {}
        self.names: dict[int, str] = {}
        for spec in rows:
            self.register(spec)

    def register(self, spec: ApiSpec) -> None:
        if spec.api_key in self.apis:
            raise ValueError(f"API {spec.name} ({spec.api_key}) is registered twice")
        self.apis[spec.api_key] = spec
        self.answered_versions[spec.api_key] = spec.versions
        if spec.advertised:
            self.api_versions[spec.api_key] = spec.versions
        self.handlers[spec.api_key] = self._resolve(spec)
        self.names[spec.api_key] = spec.name
