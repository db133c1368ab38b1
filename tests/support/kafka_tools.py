"""Apache Kafka's own command-line tools (kafka-tools 4.3.1 from Maven Central, the libs/ set
of scripts/fetch_java_jars.py) run against any bootstrap: Tansu, a kcoord gateway, a real Kafka.

    res = consumer_groups(bootstrap, "--describe", "--group", g)   # kafka-consumer-groups.sh
    res.check()                      # raises ToolError naming the command, rc and output
    rows = parse_tables(res.stdout)  # [{"GROUP": g, "TOPIC": t, "PARTITION": "0", ...}, ...]

Every run is bounded (``timeout``: the JVM is killed and ToolError raised); the tool's own
admin calls are bounded by ``--timeout`` (ms, 5000 by default) where the tool takes it.
"""
from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .java import ensure_java_jars, libs_classpath

CONSUMER_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
# Kafka's bin/kafka-run-class.sh uses -Xmx256m for tools; C1 + serial GC for a short-lived JVM.
TOOL_JVM_OPTS = ("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:-UsePerfData")


class ToolError(AssertionError):
    pass


@dataclass(frozen=True)
class ToolResult:
    argv: list[str]
    rc: int
    stdout: str
    stderr: str

    def describe(self) -> str:
        return (f"`{' '.join(self.argv[-12:])}` rc={self.rc}\nstdout:\n{self.stdout[-3000:]}\n"
                f"stderr:\n{self.stderr[-3000:]}")

    def check(self) -> ToolResult:
        if self.rc != 0:
            raise ToolError(self.describe())
        return self


def run_tool(main_class: str, args: Sequence[str], *, timeout: float = 60.0,
             jvm_opts: Sequence[str] = TOOL_JVM_OPTS) -> ToolResult:
    """Run a tool class with the libs/ classpath; its rc, stdout and stderr (never raises on rc)."""
    cache = ensure_java_jars()
    argv = ["java", *jvm_opts, f"-Dlog4j2.configurationFile={cache / 'log4j2.properties'}",
            "-cp", libs_classpath(cache), main_class, *args]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:  # subprocess.run has killed the JVM
        out = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
        err = (exc.stderr or b"").decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
        raise ToolError(f"{main_class} still running after {timeout}s, killed: "
                        f"{ToolResult(argv, -9, out, err).describe()}") from None
    return ToolResult(argv, proc.returncode, proc.stdout, proc.stderr)


def consumer_groups(bootstrap: str, *args: str, timeout: float = 60.0,
                    command_config: dict[str, Any] | None = None) -> ToolResult:
    """kafka-consumer-groups: ``--list``, ``--describe [--members|--offsets|--state]``,
    ``--reset-offsets ... --execute``, ``--delete``, ``--delete-offsets``. ``command_config``:
    admin client properties (security settings), passed as ``--command-config FILE``."""
    with tempfile.TemporaryDirectory(prefix="kcoord-tool-") as tmp:
        extra: list[str] = []
        if command_config:
            props = Path(tmp) / "command.properties"
            props.write_text("".join(f"{k}={v}\n" for k, v in command_config.items()))
            extra = ["--command-config", str(props)]
        return run_tool(CONSUMER_GROUP_COMMAND, ["--bootstrap-server", bootstrap, *extra, *args], timeout=timeout)


def parse_tables(stdout: str) -> list[dict[str, str]]:
    """The rows of the tool's tables: a header line of upper-case column names (starting with
    GROUP), then one whitespace-separated row per line until a blank line; other lines are
    skipped. Notes such as "Consumer group 'g' has no active members." go to stderr."""
    rows: list[dict[str, str]] = []
    header: list[str] | None = None
    for line in stdout.splitlines():
        cells = line.split()
        if not cells:
            header = None
        elif cells[0] == "GROUP" and all(c == c.upper() for c in cells):
            header = cells
        elif header is not None and len(cells) == len(header):
            rows.append(dict(zip(header, cells)))
    return rows
