"""The 11th member's path to its first record, phase by phase, from librdkafka's own log.

    .venv/bin/python bench/side_by_side/join_phases.py RESULTS.json [--config tuned]

RESULTS.json is what ``bench/bench_side_by_side.py --workloads join --join-debug
cgrp,fetch,protocol`` wrote: each join run keeps the joiner's subscribe() on the wall clock
(``t_join_wall``) and its librdkafka log (``joiner_log``, debug stamps in wall-clock
milliseconds). Each run's row, in ms from subscribe():

- ``hb1``: the first ConsumerGroupHeartbeat sent; ``hbs``: heartbeats sent before the one
  whose answer carried partitions;
- ``assign``: the heartbeat answer carrying the first partitions; ``steps``: the answers that
  added partitions within the run's first second (1: all at once);
- ``of``: OffsetFetch answered (after ``assign``); ``lo``: ListOffsets sent, if any;
- ``fetch``: the first Fetch sent after ``assign``; ``rtt``: its round trip; ``backlog``:
  records it brought (0: the committed offset was the log end, the Fetch waited for the
  producer's next batch on those partitions);
- ``records``: the first Fetch answer with records, librdkafka's "Enqueue N message(s)";
- ``first``: the figure itself, the member's first "record" event (its consume() loop
  returns a batch after its 50 ms timeout unless 500 records are there).
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

LINE = re.compile(r"^%\d\|(?P<t>\d+\.\d+)\|(?P<fac>[A-Z_]+)\|[^|]*\| \[thrd:(?P<thrd>[^\]]*)\]: (?P<msg>.*)$")
SENT = re.compile(r"Sent (?P<api>\w+)Request \(v\d+, \d+ bytes @ \d+, CorrId (?P<corr>\d+)\)")
RECV = re.compile(r"Received (?P<api>\w+)Response \(v\d+, \d+ bytes, CorrId (?P<corr>\d+), rtt (?P<rtt>[\d.]+)ms\)")
TARGET = re.compile(r"received target assignment \"(?P<parts>.*)\"")
ADDED = re.compile(r"incremental assignment: (?P<n>\d+) newly added")
ENQUEUE = re.compile(r"Enqueue (?P<n>\d+) message\(s\)")


@dataclass
class Phases:
    side: str
    run: int
    hb1: float | None = None
    hbs: int = 0
    assign: float | None = None
    steps: int = 0
    of: float | None = None
    lo: float | None = None
    fetch: float | None = None
    rtt: float | None = None
    backlog: int | None = None
    records: float | None = None
    first: float | None = None
    notes: list[str] = field(default_factory=list)


def parse(log: Path, t0: float, side: str, run: int, first_s: float | None) -> Phases:
    ph = Phases(side, run, first=None if first_s is None else first_s * 1000)
    fetch_corr: tuple[str, str] | None = None      # (thread, corr id) of the first Fetch after assign
    after_first_fetch = False
    for raw in log.read_text(errors="replace").splitlines():
        m = LINE.match(raw)
        if not m:
            continue
        t = (float(m["t"]) - t0) * 1000
        msg, thrd = m["msg"], m["thrd"]
        sent, recv = SENT.search(msg), RECV.search(msg)
        if sent and sent["api"] == "ConsumerGroupHeartbeat":
            ph.hb1 = t if ph.hb1 is None else ph.hb1
            if ph.assign is None:
                ph.hbs += 1
        tgt = TARGET.search(msg)
        if tgt and tgt["parts"] and ph.assign is None:
            ph.assign = t
        if ADDED.search(msg) and int(ADDED.search(msg)["n"]) > 0 and t < 1000:  # type: ignore[index]
            ph.steps += 1
        if ph.assign is None:
            continue
        if recv and recv["api"] == "OffsetFetch" and ph.of is None:
            ph.of = t
        if sent and sent["api"] == "ListOffsets" and ph.lo is None:
            ph.lo = t
        if sent and sent["api"] == "Fetch" and ph.fetch is None:
            ph.fetch, fetch_corr = t, (thrd, sent["corr"])
        if recv and recv["api"] == "Fetch" and fetch_corr == (thrd, recv["corr"]) and ph.rtt is None:
            ph.rtt, after_first_fetch = float(recv["rtt"]), True
            ph.backlog = 0
            continue
        enq = ENQUEUE.search(msg)
        if enq and int(enq["n"]) > 0:
            if after_first_fetch:
                ph.backlog = (ph.backlog or 0) + int(enq["n"])
            if ph.records is None:
                ph.records = t
        elif after_first_fetch and m["fac"] in ("SEND", "RECV") and fetch_corr and thrd == fetch_corr[0]:
            # The first answer's records are its broker thread's lines up to its next request.
            after_first_fetch = False
    return ph


def runs(results: dict, config: str) -> list[Phases]:
    out = []
    for side, rows in results["figures"][config]["join"].items():
        for i, r in enumerate(rows):
            if not r or not r.get("joiner_log"):
                continue
            out.append(parse(Path(r["joiner_log"]), r["t_join_wall"], side, i, r.get("first_record_s")))
    return out


def _f(x: float | int | None, fmt: str = "{:.0f}") -> str:
    return "—" if x is None else fmt.format(x)


def table(phases: list[Phases]) -> str:
    head = ("| side | run | hb1 | hbs | assign | steps | OffsetFetch | ListOffsets | Fetch sent | its rtt | "
            "its records | records | first record |")
    rows = [head, "|" + "---|" * 13]
    for p in sorted(phases, key=lambda p: (p.side, p.run)):
        rows.append(f"| {p.side} | {p.run + 1} | {_f(p.hb1)} | {p.hbs} | {_f(p.assign)} | {p.steps} | {_f(p.of)} | "
                    f"{_f(p.lo)} | {_f(p.fetch)} | {_f(p.rtt, '{:.1f}')} | {_f(p.backlog)} | {_f(p.records)} | "
                    f"{_f(p.first)} |")
    for side in sorted({p.side for p in phases}):
        mine = [p for p in phases if p.side == side]

        def med(get, mine: list[Phases] = mine) -> str:
            vals = [v for v in map(get, mine) if v is not None]
            return _f(statistics.median(vals)) if vals else "—"
        rows.append(f"| **{side}** median | | {med(lambda p: p.hb1)} | {med(lambda p: p.hbs)} | "
                    f"{med(lambda p: p.assign)} | {med(lambda p: p.steps)} | {med(lambda p: p.of)} | | "
                    f"{med(lambda p: p.fetch)} | {med(lambda p: p.rtt)} | {med(lambda p: p.backlog)} | "
                    f"{med(lambda p: p.records)} | {med(lambda p: p.first)} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", type=Path, nargs="+", help="side-by-side.json of --join-debug runs")
    ap.add_argument("--config", default="tuned")
    a = ap.parse_args(argv)
    phases = [p for path in a.results for p in runs(json.loads(path.read_text()), a.config)]
    if not phases:
        print("no join runs with a joiner log (run the bench with --join-debug)", file=sys.stderr)
        return 1
    print(table(phases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
