"""bench_side_by_side's --join-debug pieces: only the 11th member logs librdkafka's debug
contexts (the ten others run as without it), and bench/side_by_side/join_phases.py reads the
phases of its path to the first record from such a log."""
from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "bench"
sys.path.insert(0, str(BENCH))

from side_by_side import join_phases  # noqa: E402
from vs_kafka import clients  # noqa: E402

T0 = 1_796_000_000.0


def _props(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == "--prop"]


def test_only_the_joiner_logs_debug():
    target = clients.consumer_target("sbs-tuned-kcoord", "127.0.0.1:1", "cgrp,fetch,protocol")
    assert "debug=cgrp,fetch,protocol" in _props(target.argv("t", "g", clients.JOINER))
    assert not any(p.startswith("debug=") for p in _props(target.argv("t", "g", "m3")))
    plain = clients.consumer_target("sbs-tuned-kcoord", "127.0.0.1:1")
    assert not any(p.startswith("debug=") for p in _props(plain.argv("t", "g", clients.JOINER)))


def _line(ms: float, fac: str, thrd: str, msg: str) -> str:
    return f"%7|{T0 + ms / 1000:.3f}|{fac}|rdkafka#consumer-1| [thrd:{thrd}]: {msg}"


def test_phases_from_a_joiner_log(tmp_path: Path):
    gc, b1 = "GroupCoordinator", "127.0.0.1:9/1"
    lines = [
        _line(2, "SEND", gc, "GroupCoordinator/1: Sent ConsumerGroupHeartbeatRequest (v1, 115 bytes @ 0, CorrId 3)"),
        _line(5, "HEARTBEAT", "main", 'ConsumerGroupHeartbeat received target assignment ""'),
        _line(104, "SEND", gc, "GroupCoordinator/1: Sent ConsumerGroupHeartbeatRequest (v1, 115 bytes @ 0, CorrId 4)"),
        _line(105, "HEARTBEAT", "main", 'ConsumerGroupHeartbeat received target assignment "(null)(x)[2]"'),
        _line(105, "COOPASSIGN", "main", 'Group "g": incremental assignment: 1 newly added, 0 revoked partitions'),
        _line(106, "RECV", gc, "GroupCoordinator/1: Received OffsetFetchResponse (v9, 92 bytes, CorrId 5, rtt 0.30ms)"),
        _line(107, "SEND", b1, "127.0.0.1:9/1: Sent FetchRequest (v16, 94 bytes @ 0, CorrId 4)"),
        # the coordinator's answer in between does not end the Fetch answer's records
        _line(150, "RECV", b1, "127.0.0.1:9/1: Received FetchResponse (v16, 697 bytes, CorrId 4, rtt 86.90ms)"),
        _line(150, "RECV", gc, "GroupCoordinator/1: Received ConsumerGroupHeartbeatResponse (v1, 41 bytes, CorrId 6, "
                               "rtt 0.20ms)"),
        _line(151, "CONSUME", b1, "127.0.0.1:9/1: Enqueue 21 message(s) (420 bytes, 21 ops) on t [2] fetch queue"),
        _line(151, "SEND", b1, "127.0.0.1:9/1: Sent FetchRequest (v16, 94 bytes @ 0, CorrId 5)"),
        _line(160, "CONSUME", b1, "127.0.0.1:9/1: Enqueue 5 message(s) (100 bytes, 5 ops) on t [2] fetch queue"),
        "not a librdkafka line",
    ]
    log = tmp_path / "member-new.log"
    log.write_text("\n".join(lines) + "\n")
    ph = join_phases.parse(log, T0, "kcoord", 0, 0.2)
    assert (ph.hbs, ph.steps, ph.lo) == (2, 1, None)
    assert round(ph.hb1 or 0) == 2 and round(ph.assign or 0) == 105 and round(ph.of or 0) == 106
    assert round(ph.fetch or 0) == 107 and ph.rtt == 86.9 and ph.backlog == 21
    assert round(ph.records or 0) == 151 and round(ph.first or 0) == 200
    table = join_phases.table([ph])
    assert "| kcoord | 1 | 2 | 2 | 105 | 1 | 106 | — | 107 | 86.9 | 21 | 151 | 200 |" in table
