"""The harnesses' instrumented imports (fuzz/atheris_*.py).

Each harness's entry point (`one`, `decode_one`, `run_provider`) is also driven by seeded unit
tests, where atheris need not be installed: there `instrumented()` is a no-op and `atheris` is
None. Under atheris the harness's kcoord imports are instrumented, which only guides the
fuzzer (tests/unit/fuzz/atheris_runner.py instruments them all once, and makes this a no-op
meanwhile: the attribute is read at each call).
"""
from __future__ import annotations

import contextlib
from typing import Any

try:
    import atheris
except ImportError:
    atheris = None


def instrumented() -> Any:
    """atheris.instrument_imports() when atheris is installed, else a context doing nothing."""
    return atheris.instrument_imports() if atheris is not None else contextlib.nullcontext()
