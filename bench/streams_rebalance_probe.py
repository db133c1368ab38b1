"""What a process did during the Streams rebalance benchmark's start window
(bench/bench_streams_rebalance.py): its CPU seconds from /proc/PID/stat (utime + stime, every
thread), sampled every SAMPLE_S so the load lines up with the instances' own lines (one
CLOCK_MONOTONIC clock, as time.monotonic_ns); and for a kcoord, from its Prometheus endpoint
(`kcoord serve --metrics-port`), the StreamsGroupHeartbeat answers (count by error, latency
histogram) and the forwarded requests (count by API), read at the window's ends and every
METRICS_EVERY_S between (a coarse arrival series).

Rules: diagnosis only, no assertion; a read that fails (the process gone) ends the samples,
never the benchmark.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Any

from support.metrics import scrape

SAMPLE_S = 0.1
METRICS_EVERY_S = 0.5
TICK = os.sysconf("SC_CLK_TCK")
HEARTBEAT = "StreamsGroupHeartbeat"


def machine_busy_seconds() -> float:
    """The whole machine's busy CPU seconds, all cores (/proc/stat's first line: every column
    but idle and iowait): what the benchmark's processes and anything else running used."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:9]]
    return (sum(fields) - fields[3] - fields[4]) / TICK


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICK      # fields 14 and 15 of proc(5)


def _labels(key: str) -> dict[str, str]:
    inner = key.partition("{")[2].rstrip("}")
    return dict((k, v.strip('"')) for k, _, v in (p.partition("=") for p in inner.split(",") if p))


def kcoord_counts(samples: dict[str, float]) -> dict[str, Any]:
    """The heartbeat and forwarding figures of one scrape."""
    out: dict[str, Any] = {"heartbeats": {}, "heartbeat_buckets": {}, "heartbeat_sum_s": 0.0, "forwarded": {},
                           "list_offsets_held": {}}
    for key, value in samples.items():
        name = key.partition("{")[0]
        labels = _labels(key)
        if name == "kcoord_group_requests_total" and labels.get("api") == HEARTBEAT:
            out["heartbeats"][labels.get("error", "")] = value
        elif name == "kcoord_group_request_seconds_bucket" and labels.get("api") == HEARTBEAT:
            out["heartbeat_buckets"][labels["le"]] = value
        elif name == "kcoord_group_request_seconds_sum" and labels.get("api") == HEARTBEAT:
            out["heartbeat_sum_s"] = value
        elif name == "kcoord_gateway_forwarded_requests_total":
            api = labels.get("api", "")
            out["forwarded"][api] = out["forwarded"].get(api, 0) + value
        elif name == "kcoord_gateway_list_offsets_held_total":    # gateway/list_offsets_hold.py
            out["list_offsets_held"][labels.get("outcome", "")] = value
    return out


def _minus(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}


class Probe:
    """Samples one process (and, with ``metrics_port``, its kcoord metrics) from start() to stop();
    ``pid`` 0: the whole machine (machine_busy_seconds)."""

    def __init__(self, pid: int, metrics_port: int | None = None) -> None:
        self.pid, self.metrics_port = pid, metrics_port
        self._read = machine_busy_seconds if pid == 0 else lambda: cpu_seconds(pid)
        self.cpu: list[tuple[int, float]] = []
        self.metrics: list[tuple[int, dict[str, Any]]] = []
        self.metrics_error: str | None = None      # the first failed scrape, said in the figures
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"probe-{pid}")

    def _scrape(self) -> None:
        if self.metrics_port is not None:
            try:
                self.metrics.append((time.monotonic_ns(), kcoord_counts(scrape(self.metrics_port))))
            except OSError as e:       # an HTTP error answer too (urllib's HTTPError)
                self.metrics_error = self.metrics_error or f"{e}"[:200]

    def _run(self) -> None:
        next_metrics = 0.0
        while not self._stop.is_set():
            try:
                self.cpu.append((time.monotonic_ns(), self._read()))
            except OSError:
                return
            if time.monotonic() >= next_metrics:
                self._scrape()
                next_metrics = time.monotonic() + METRICS_EVERY_S
            self._stop.wait(SAMPLE_S)

    def start(self) -> Probe:
        self._thread.start()
        return self

    def stop(self, origin_ns: int) -> dict[str, Any]:
        """The window's figures; times in seconds from ``origin_ns`` (the last instance's "ready")."""
        self._stop.set()
        self._thread.join(5)
        self._scrape()
        out: dict[str, Any] = {}
        if self.metrics_error is not None:
            out["metrics_error"] = f"{len(self.metrics)} scrapes answered; the first failure: {self.metrics_error}"
        if len(self.cpu) >= 2:
            (t0, c0), (t1, c1) = self.cpu[0], self.cpu[-1]
            out["cpu_s"] = round(c1 - c0, 2)
            out["window_s"] = round((t1 - t0) / 1e9, 2)
            # CPU per half second from the origin: where in the start the process was busy.
            out["cpu_per_half_s"] = _per_bin([(t, c - c0) for t, c in self.cpu], origin_ns, 0.5)
        if len(self.metrics) >= 2:
            first, last = self.metrics[0][1], self.metrics[-1][1]
            count = _minus(last["heartbeats"], first["heartbeats"])
            n = sum(count.values())
            buckets = _minus(last["heartbeat_buckets"], first["heartbeat_buckets"])
            out["heartbeats"] = count
            out["heartbeat_mean_ms"] = round(1000 * (last["heartbeat_sum_s"] - first["heartbeat_sum_s"]) / n, 2) \
                if n else None
            out["heartbeat_le_buckets"] = {le: int(v) for le, v in sorted(buckets.items(), key=lambda kv: float(kv[0]))}
            out["forwarded"] = {k: int(v) for k, v in sorted(_minus(last["forwarded"], first["forwarded"]).items())}
            out["list_offsets_held"] = {k: int(v) for k, v in sorted(
                _minus(last["list_offsets_held"], first["list_offsets_held"]).items())}
            # Heartbeats answered per METRICS_EVERY_S from the origin (a coarse arrival series).
            out["heartbeats_series"] = [(round((t - origin_ns) / 1e9, 2), int(sum(m["heartbeats"].values())
                                                                             - sum(first["heartbeats"].values())))
                                        for t, m in self.metrics]
        return out


def _per_bin(series: list[tuple[int, float]], origin_ns: int, width_s: float) -> list[tuple[float, float]]:
    """(bin start s from origin, CPU s spent in the bin), from a cumulative (t ns, cpu s) series."""
    bins: dict[float, float] = {}
    for (_ta, ca), (tb, cb) in zip(series, series[1:]):
        key = ((tb - origin_ns) / 1e9 // width_s) * width_s
        bins[key] = bins.get(key, 0.0) + (cb - ca)
    return [(round(k, 1), round(v, 2)) for k, v in sorted(bins.items())]
