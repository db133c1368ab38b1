"""Shows that kio's native reader, given a bomb without the bounded walk, aborts the
process: run in a child with a 2 GB address-space limit, so the allocation fails on any
host (without the limit, a host that overcommits memory could grant 34 GB and the child
would fail with a buffer underflow instead)."""
from __future__ import annotations

import subprocess
import sys

ADDRESS_SPACE = 2 << 30


def kio_alone_aborts(imports: str, reader: str, data: bytes, offset: int = 0) -> bool:
    """True when ``entity_reader(<reader>)(data, offset)`` kills a child that ran
    ``imports`` first, with kio's 'memory allocation of N bytes failed'."""
    child = subprocess.run(
        [sys.executable, "-c",
         f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({ADDRESS_SPACE}, {ADDRESS_SPACE}));"
         f"from kio.serial import entity_reader; {imports};"
         f"entity_reader({reader})({data!r}, {offset})"],
        capture_output=True, text=True, timeout=60)
    return child.returncode != 0 and "memory allocation" in child.stderr
