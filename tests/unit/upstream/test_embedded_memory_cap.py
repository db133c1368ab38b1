"""The embedded broker's memory cap (upstream/memory_cap.py): the size setting, the choice
between a delegated cgroup v2 and RLIMIT_AS (a fake cgroup tree under tmp_path), what the
child applies between fork and exec, and how an exit is judged."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from coordinator.upstream import memory_cap
from coordinator.upstream.memory_cap import MemoryCap, parse_size

SHOW = ("import resource; print(resource.getrlimit(resource.RLIMIT_AS)); "
        "print(open('/proc/self/oom_score_adj').read().strip())")


@pytest.mark.parametrize("text, size", [("512m", 512 * 1024**2), ("2g", 2 * 1024**3), ("2GiB", 2 * 1024**3),
                                        ("1.5g", 3 * 1024**3 // 2), ("none", None), ("0", None),
                                        (str(1024**3), 1024**3)])
def test_sizes(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["12x", "-1g", "", "1m", "g"])
def test_sizes_refused(text):
    with pytest.raises(ValueError):
        parse_size(text)


def fake_cgroup_tree(tmp_path: Path, subtree: str) -> tuple[Path, Path]:
    """A unified hierarchy at tmp_path/cg with this process in /svc; (root, /proc/self/cgroup)."""
    root = tmp_path / "cg"
    own = root / "svc"
    own.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpu memory pids\n")
    (own / "cgroup.subtree_control").write_text(subtree)
    (own / "cgroup.procs").write_text("")
    proc = tmp_path / "proc-self-cgroup"
    proc.write_text("0::/svc\n")
    return root, proc


def test_a_delegated_cgroup_gets_a_child_with_memory_max_and_no_swap(tmp_path):
    root, proc = fake_cgroup_tree(tmp_path, "cpu memory\n")
    child = root / "svc" / f"kcoord-tansu-{os.getpid()}"
    child.mkdir()                                  # the kernel would make these files
    (child / "memory.swap.max").write_text("max")
    (child / "cgroup.procs").write_text("")
    cap = memory_cap.prepare(512 * 1024**2, name="kcoord-tansu", root=root, proc_cgroup=proc)
    assert cap.cgroup == child
    assert (child / "memory.max").read_text() == str(512 * 1024**2)
    assert (child / "memory.swap.max").read_text() == "0"
    assert cap.describe() == f"memory cap 512 MiB by cgroup v2 memory.max ({child})"
    # the child joins the cgroup itself ("0": the writing process) and sets no rlimit
    out = subprocess.run([sys.executable, "-c", SHOW], preexec_fn=cap.in_child, capture_output=True,
                         text=True, check=True).stdout
    assert (child / "cgroup.procs").read_text() == "0"
    assert out.splitlines() == ["(-1, -1)", "1000"]
    (child / "memory.events").write_text("low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n")
    assert cap.hit(-9, "") is True


@pytest.mark.parametrize("subtree", ["cpu pids\n", ""])
def test_without_the_memory_controller_delegated_the_cap_is_rlimit_as(tmp_path, subtree):
    root, proc = fake_cgroup_tree(tmp_path, subtree)
    cap = memory_cap.prepare(256 * 1024**2, root=root, proc_cgroup=proc)
    assert cap.cgroup is None and cap.mechanism == "address space (RLIMIT_AS)"
    assert sorted(p.name for p in (root / "svc").iterdir()) == ["cgroup.procs", "cgroup.subtree_control"]


def test_cgroup_v1_means_rlimit_as(tmp_path):
    cap = memory_cap.prepare(256 * 1024**2, root=tmp_path / "no-unified", proc_cgroup=tmp_path / "missing")
    assert cap.cgroup is None and cap.limit == 256 * 1024**2


def test_the_child_runs_under_rlimit_as_and_oom_score_adj_1000():
    cap = MemoryCap(256 * 1024**2)
    out = subprocess.run([sys.executable, "-c", SHOW], preexec_fn=cap.in_child, capture_output=True,
                         text=True, check=True).stdout
    assert out.splitlines() == [f"({256 * 1024**2}, {256 * 1024**2})", "1000"]


def test_an_allocation_past_the_cap_fails_in_the_child_only():
    cap = MemoryCap(256 * 1024**2)
    run = subprocess.run([sys.executable, "-c", "b = bytearray(1024**3)"], preexec_fn=cap.in_child,
                         capture_output=True, text=True)
    assert run.returncode != 0 and "MemoryError" in run.stderr


def test_no_cap_still_raises_oom_score_adj():
    cap = MemoryCap(None)
    out = subprocess.run([sys.executable, "-c", SHOW], preexec_fn=cap.in_child, capture_output=True,
                         text=True, check=True).stdout
    assert out.splitlines() == ["(-1, -1)", "1000"]
    assert cap.describe() == "no memory cap" and cap.hit(-6, "memory allocation of 8 bytes failed") is None


def test_a_jvm_broker_gets_heap_and_direct_memory_not_rlimit():
    cap = MemoryCap(1024**3, jvm=True)
    assert cap.jvm_options() == ["-Xmx512m", "-XX:MaxDirectMemorySize=256m"]
    assert cap.mechanism == "JVM heap and direct memory"
    out = subprocess.run([sys.executable, "-c", SHOW], preexec_fn=cap.in_child, capture_output=True,
                         text=True, check=True).stdout
    assert out.splitlines()[0] == "(-1, -1)"


@pytest.mark.parametrize("code, tail, hit", [
    (-6, "memory allocation of 206152139040 bytes failed", True),
    (-9, "tansu broker\n", False),         # killed by someone else: not the address-space cap
    (1, "memory allocation of 8 bytes failed", False),
])
def test_an_rlimit_exit_is_the_cap_only_for_a_failed_allocation(code, tail, hit):
    assert MemoryCap(512 * 1024**2).hit(code, tail) is hit
