"""support/durations.py: test files longest first (measured, else tests x mean per test), a
file's tests together and in order; the recorder's per-file table merges into the file it
writes and only the controller records."""
from __future__ import annotations

import json
from dataclasses import dataclass

from support import durations


@dataclass
class Item:
    nodeid: str


@dataclass
class Report:
    nodeid: str
    duration: float


def items(spec: dict[str, int]) -> list[Item]:
    return [Item(f"{path}::t{i}") for path, n in spec.items() for i in range(n)]


def test_files_go_longest_first_and_keep_their_tests_together_in_order():
    collected = items({"tests/unit/a.py": 200, "tests/integration/x/one_slow.py": 1,
                       "tests/integration/x/many.py": 6, "tests/integration/x/few.py": 2})
    table = {"tests/integration/x/one_slow.py": {"seconds": 60.0, "tests": 1},
             "tests/integration/x/few.py": {"seconds": 12.0, "tests": 2},
             "tests/unit/b.py": {"seconds": 5.0, "tests": 100}}
    durations.longest_files_first(collected, table)
    order = [item.nodeid for item in collected]
    # one_slow 60 s; many: 6 x (72 s / 3 tests) = 144 s; few 12 s; unit a: 200 x (5 s / 100) = 10 s
    files = list(dict.fromkeys(nodeid.split("::")[0] for nodeid in order))
    assert files == ["tests/integration/x/many.py", "tests/integration/x/one_slow.py",
                     "tests/integration/x/few.py", "tests/unit/a.py"]
    a_tests = [nodeid for nodeid in order if nodeid.startswith("tests/unit/a.py")]
    assert a_tests == [f"tests/unit/a.py::t{i}" for i in range(200)]


def test_a_row_without_a_test_count_is_a_lower_bound():
    cost = durations.expected_seconds({"tests/integration/x/f.py": 40},
                                      {"tests/integration/x/f.py": {"seconds": 30.0}})
    assert cost["tests/integration/x/f.py"] == 40 * durations.DEFAULT_SECONDS["integration"]


def test_the_recorder_merges_its_files_into_the_table(tmp_path, monkeypatch):
    out = tmp_path / "durations.json"
    out.write_text(json.dumps({"tests/unit/old.py": {"seconds": 1.0, "tests": 3},
                               "tests/unit/a.py": {"seconds": 9.0, "tests": 9}}))
    monkeypatch.setenv(durations.ENV_OUT, str(out))
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    recorder = durations.Recorder()
    for phase in (0.5, 2.0, 0.5):
        recorder.add(Report("tests/unit/a.py::t0", phase))
    recorder.add(Report("tests/unit/a.py::t1", 1.0))
    recorder.write()
    assert json.loads(out.read_text()) == {"tests/unit/a.py": {"seconds": 4.0, "tests": 2},
                                           "tests/unit/old.py": {"seconds": 1.0, "tests": 3}}
    assert "tests/unit/a.py" in "\n".join(recorder.summary())


def test_a_worker_records_nothing(tmp_path, monkeypatch):
    out = tmp_path / "durations.json"
    monkeypatch.setenv(durations.ENV_OUT, str(out))
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    recorder = durations.Recorder()
    recorder.add(Report("tests/unit/a.py::t0", 1.0))
    recorder.write()
    assert not out.exists() and recorder.summary() == []
