"""Instructions per state-topic append through kcoord's writer (coordinator/runtime/lean_writer.py),
counted by callgrind in kcoord's process only (the aiokafka producer it was compared with is
gone from kcoord; its figures stay in docs/measurements/cpu-per-commit.md).

    .venv/bin/python bench/callgrind_state_writer.py [--rounds 200,1200] [--shards 10] [--records 4]

A Tansu broker (tests/support/tansu.py) runs outside valgrind. For each writer, the same
script runs twice under `valgrind --tool=callgrind` (apt package valgrind), with the two
numbers of ``--rounds``; each round, ``--shards`` partitions get one append of
``--records`` records each, started in one loop turn (as the shards' writers flush at the
end of a turn), and the round waits for every acknowledgement (acks=all). The difference of
the two runs' totals over the difference of their appends is the writer's cost per append:
start-up, imports, topic creation and shutdown cancel out. Waiting for the broker costs no
instructions, so a loaded machine changes the count little; the batching is fixed by the
rounds (one batch per partition and round).
"""
from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("KCOORD_TEST_PORTS", "29700-29799")
sys.path[:0] = [str(REPO), str(REPO / "tests")]

KEY = b"\x00\x01" + b"\x00\x0bgroup-00042" + b"\x00\x06orders" + b"\x00\x00\x00\x03"
VALUE = bytes(60)


async def _appends(bootstrap: str, topic: str, writer: str, rounds: int, shards: int, records: int) -> None:
    from coordinator.runtime.state_topic import StateTopic

    state = StateTopic(bootstrap, topic, shards)
    await state.start()
    try:
        batch = [(KEY + bytes([i]), VALUE) for i in range(records)]
        for _ in range(rounds):
            await asyncio.gather(*(state.append(p, batch, 0) for p in range(shards)))
    finally:
        await state.stop()


def _count(bootstrap: str, writer: str, rounds: int, a: argparse.Namespace, n: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, __file__,
                        "--child", bootstrap, "--writer", writer, "--rounds", str(rounds), "--shards", str(a.shards),
                        "--records", str(a.records), "--topic", f"__kcoord_cg_{writer}_{n}_{os.getpid()}"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO,
                       env={**os.environ, "PYTHONHASHSEED": "0"})
        found = re.search(r"^(?:summary|totals):\s+(\d+)", Path(out).read_text(), re.MULTILINE)
        if found is None:
            raise SystemExit("callgrind wrote no summary")
        return int(found.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", default="200,1200")
    ap.add_argument("--shards", type=int, default=10)
    ap.add_argument("--records", type=int, default=4)
    ap.add_argument("--writers", default="lean")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--writer", default="lean", help=argparse.SUPPRESS)
    ap.add_argument("--topic", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child is not None:
        asyncio.run(_appends(a.child, a.topic, a.writer, int(a.rounds), a.shards, a.records))
        return
    from support.tansu import start_tansu

    low, high = (int(r) for r in a.rounds.split(","))
    broker = start_tansu()
    try:
        for n, writer in enumerate(a.writers.split(",")):
            counts = [_count(broker.bootstrap, writer, rounds, a, 2 * n + i) for i, rounds in enumerate((low, high))]
            per = (counts[1] - counts[0]) / ((high - low) * a.shards)
            print(f"{writer}: {per:,.0f} instructions per append of {a.records} records "
                  f"({counts[0]:,} for {low} rounds, {counts[1]:,} for {high}; {sys.version.split()[0]})", flush=True)
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
