"""Fixture factories for the integration directories' conftests: the module-scoped
``upstream`` and the `kcoord serve` gateways that several directories define alike.

Rules:
- a factory returns a pytest fixture; a conftest binds it to a module attribute
  (``upstream = module_upstream(doc=...)``), and pytest registers it under the name it is
  given, so tests and test ids see exactly what a hand-written fixture would give them;
- the fixtures' arguments are the ones the hand-written fixtures had (``upstream``,
  ``request``, ``names``, ``shared_kcoord``), so ``pytest --setup-plan`` reads the same;
- every gateway started here is stopped at its fixture's teardown, unless a test left it
  exited (support.kcoord.serving).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from .kcoord import FAST, KcoordProcess, serving
from .names import TestNames, unique_name
from .upstreams import cluster


def _documented(function: Callable[..., Any], doc: str | None) -> Callable[..., Any]:
    function.__doc__ = doc
    return function


def module_upstream(*, tansu: str = "tansu", doc: str | None = None) -> Any:
    """``upstream`` at module scope: one cluster per module and upstream id (pytest groups a
    module's tests by upstream), so a module's shared gateway serves all of them. ``tansu``:
    the fixture the ``tansu`` id stands for (a directory may have a Tansu of its own)."""
    def upstream(request: pytest.FixtureRequest) -> Any:
        return cluster(request, tansu=tansu)
    return pytest.fixture(scope="module")(_documented(upstream, doc))


def module_kcoord(config: tuple[str, ...] = FAST, *, name: str = "shared_kcoord", doc: str | None = None) -> Any:
    """One `kcoord serve` per module and upstream, on a state topic named after the module
    (a kcoord start costs ~5 s; each test uses its own topics and groups)."""
    def shared(upstream: Any, request: pytest.FixtureRequest) -> Iterator[KcoordProcess]:
        yield from serving(KcoordProcess(upstream=upstream.bootstrap, config=config,
                                         state_topic=unique_name(f"__kcoord_{request.module.__name__}")))
    return pytest.fixture(scope="module", name=name)(_documented(shared, doc))


def revived_kcoord(*, name: str, doc: str | None = None) -> Any:
    """The module's ``shared_kcoord`` for one test, started again (same ports and state topic)
    first if an earlier test left it dead."""
    def revived(shared_kcoord: KcoordProcess) -> KcoordProcess:
        if not shared_kcoord.running():
            shared_kcoord.restart()
        return shared_kcoord
    return pytest.fixture(name=name)(_documented(revived, doc))


def per_test_kcoord(config: tuple[str, ...] = FAST, *, name: str, doc: str | None = None) -> Any:
    """A `kcoord serve` of one test's own in front of ``upstream``, on a state topic of its own."""
    def own(upstream: Any, names: TestNames) -> Iterator[KcoordProcess]:
        yield from serving(KcoordProcess(upstream=upstream.bootstrap, state_topic=f"__kcoord_{names.topic()}",
                                         config=config))
    return pytest.fixture(name=name)(_documented(own, doc))
