"""A distributed Kafka Connect 4.4 worker as a subprocess: a real member of a classic
group of protocol type "connect", whose connectors and tasks the group's leader assigns.

Jars come from Maven Central through scripts/fetch_java_jars.py: the libs/ set
(connect-runtime with its real dependencies, jetty-security included, as a Kafka
distribution's libs/). The connectors are the tests' own (tests/clients/java/connect/:
LineFileSourceConnector, LineFileSinkConnector; Kafka 4.4's connect-file is not served
here), compiled against libs/ and found on the worker's classpath: no plugin.path.

Timings are short on purpose. The worker's own group and its sink tasks' consumer groups
are classic groups whose session timeouts must lie within the coordinator's
group.min/max.session.timeout.ms ([6 s, 30 min] by default), and the worker's defaults
(10 s session, 3 s heartbeat, 60 s offset flush) would make a test wait for nothing.

    worker = ConnectWorker(bootstrap, group_id="g", work_dir=tmp_path).start()
    worker.put_connector("src", {"connector.class": SOURCE_CONNECTOR, ...})
    worker.wait_running("src", timeout=30)
    worker.stop()
"""
from __future__ import annotations

import collections
import json
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from . import ports, processes
from .java import CONNECT_JAVA_SOURCES, ensure_java_jars, libs_classpath_with
from .wait import wait_until

# C1 and the serial GC: the worker lives for seconds on a 2-core machine (startup beats peak).
CONNECT_JVM_OPTS = ("-Xmx384m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:-UsePerfData")
MAIN_CLASS = "org.apache.kafka.connect.cli.ConnectDistributed"
# Lines of a file to a topic, and a topic's values to lines of a file (one task each).
SOURCE_CONNECTOR = "LineFileSourceConnector"
SINK_CONNECTOR = "LineFileSinkConnector"


class ConnectError(RuntimeError):
    pass


class ConnectWorker:
    """One ConnectDistributed JVM; REST on a free loopback port from the harness range."""

    def __init__(self, bootstrap: str, group_id: str, work_dir: Path, *, rest_port: int | None = None,
                 topic_prefix: str | None = None, session_timeout_ms: int = 6000,
                 heartbeat_interval_ms: int = 1000, extra: dict[str, Any] | None = None) -> None:
        self.bootstrap = bootstrap
        self.group_id = group_id
        self.work_dir = Path(work_dir)
        self.rest_port = rest_port or ports.free_port()
        prefix = topic_prefix or group_id
        self.offsets_topic = f"{prefix}-offsets"
        self.configs_topic = f"{prefix}-configs"
        self.status_topic = f"{prefix}-status"
        self.properties: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "group.id": group_id,
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable": "false",
            "value.converter.schemas.enable": "false",
            "offset.storage.topic": self.offsets_topic, "offset.storage.partitions": 1,
            "offset.storage.replication.factor": 1,
            "config.storage.topic": self.configs_topic, "config.storage.replication.factor": 1,
            "status.storage.topic": self.status_topic, "status.storage.partitions": 1,
            "status.storage.replication.factor": 1,
            "listeners": f"http://127.0.0.1:{self.rest_port}",
            "rest.advertised.host.name": "127.0.0.1", "rest.advertised.port": self.rest_port,
            "plugin.discovery": "only_scan",
            # The worker's membership of the "connect" group.
            "session.timeout.ms": session_timeout_ms, "heartbeat.interval.ms": heartbeat_interval_ms,
            "rebalance.timeout.ms": 20000,
            # Sink tasks' consumers join classic "consumer" groups of their own.
            "consumer.session.timeout.ms": session_timeout_ms,
            "consumer.heartbeat.interval.ms": heartbeat_interval_ms,
            "consumer.auto.offset.reset": "earliest",
            "offset.flush.interval.ms": 1000,
            "task.shutdown.graceful.timeout.ms": 2000,
            **(extra or {}),
        }
        self.process: subprocess.Popen | None = None
        self.log_path = self.work_dir / f"connect-{self.rest_port}.log"
        self._stderr: collections.deque[str] = collections.deque(maxlen=2000)
        self._reader: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    # --- lifecycle -------------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> ConnectWorker:
        """Launch and return once the REST API answers (the herder may still be joining)."""
        cache = ensure_java_jars()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        props = self.work_dir / f"connect-{self.rest_port}.properties"
        props.write_text("".join(f"{k}={v}\n" for k, v in self.properties.items()))
        cmd = ["java", *CONNECT_JVM_OPTS, f"-Dlog4j2.configurationFile={cache / 'log4j2.properties'}",
               "-cp", libs_classpath_with(CONNECT_JAVA_SOURCES, cache), MAIN_CLASS, str(props)]
        self.process = processes.track(subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, encoding="utf-8", errors="replace", bufsize=1))
        self._reader = threading.Thread(target=self._read_stderr, name=f"connect-{self.rest_port}", daemon=True)
        self._reader.start()

        def rest_up() -> bool:
            if self.process.poll() is not None:
                raise ConnectError(f"Connect worker exited with {self.process.returncode} before its REST "
                                   f"API answered:\n{self.stderr_text()[-4000:]}")
            try:
                return self.request("GET", "/", timeout=1.0)[0] == 200
            except OSError:
                return False

        wait_until(rest_up, timeout, 0.2, f"Connect REST API on {self.url}")
        return self

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM (the worker leaves its group and stops its tasks), SIGKILL after ``timeout``.

        A worker whose REST server failed to start can ignore SIGTERM: processes.stop kills it then.
        """
        if self.process is None:
            return 0
        rc = processes.stop(self.process, timeout)
        if self._reader is not None:
            self._reader.join(5)
        return rc

    def stderr_text(self) -> str:
        return "\n".join(self._stderr)

    def _read_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        with open(self.log_path, "w") as log:
            for line in self.process.stderr:
                self._stderr.append(line.rstrip("\n"))
                log.write(line)
                log.flush()

    # --- REST ------------------------------------------------------------------------------

    def request(self, method: str, path: str, body: Any = None, timeout: float = 10.0) -> tuple[int, Any]:
        """(HTTP status, decoded JSON body or None). HTTP errors are returned, not raised."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as err:
            status, raw = err.code, err.read()
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode(errors="replace")

    def put_connector(self, name: str, config: dict[str, Any], timeout: float = 60.0) -> Any:
        """Create or update a connector. Until the worker has joined its group the herder holds
        the request (or answers 409 while the group rebalances): retry until it accepts."""
        deadline = time.monotonic() + timeout
        answers: list[Any] = []

        def accepted() -> bool:
            try:
                answers.append(self.request("PUT", f"/connectors/{name}/config", {"name": name, **config},
                                            timeout=max(1.0, deadline - time.monotonic())))
            except OSError as exc:  # the herder held the request past our deadline
                answers.append(exc)
                return False
            status = answers[-1][0]
            if status in (200, 201):
                return True
            if status in (409, 500, 503):  # rebalancing / not joined yet / leader unknown
                return False
            raise ConnectError(f"PUT /connectors/{name}/config: {answers[-1]}")

        wait_until(accepted, timeout, 0.5, lambda: f"connector {name} accepted; last answer {answers[-1:]}")
        return answers[-1][1]

    def status(self, name: str) -> dict[str, Any] | None:
        code, body = self.request("GET", f"/connectors/{name}/status")
        return body if code == 200 else None

    def wait_running(self, name: str, timeout: float = 30.0, tasks: int = 1) -> dict[str, Any]:
        """The connector and ``tasks`` tasks RUNNING; a FAILED one fails the wait at once."""
        def running() -> dict[str, Any] | None:
            st = self.status(name)
            if st is None:
                return None
            states = [st["connector"]["state"], *(t["state"] for t in st.get("tasks", []))]
            if "FAILED" in states:
                raise ConnectError(f"connector {name} failed: {json.dumps(st)[:4000]}")
            ok = st["connector"]["state"] == "RUNNING" and len(st.get("tasks", [])) == tasks \
                and all(s == "RUNNING" for s in states)
            return st if ok else None

        return wait_until(running, timeout, 0.25, lambda: f"connector {name} RUNNING: {self.status(name)}")

    def delete_connector(self, name: str, timeout: float = 20.0) -> None:
        wait_until(lambda: self.request("DELETE", f"/connectors/{name}")[0] in (204, 404), timeout, 0.5,
                   f"connector {name} deleted")

    def __enter__(self) -> ConnectWorker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_for_lines(path: Path, expected: list[str], timeout: float) -> list[str]:
    """Wait until ``path`` holds every line of ``expected``; returns its lines."""
    def lines() -> list[str]:
        return path.read_text().splitlines() if path.exists() else []

    started = time.monotonic()
    wait_until(lambda: set(expected) <= set(lines()), timeout, 0.2,
               lambda: f"{len(set(expected) - set(lines()))} of {len(expected)} lines in {path} "
                       f"after {time.monotonic() - started:.1f}s")
    return lines()
