"""`python -m coordinator.protocol.messagegen [--check]`

Writes, for every request and response version in Kafka's `kafka-clients` jar that kio
does not have, `coordinator/protocol/messages/<api>/v<N>/<request|response>.py` (kio's
layout), and for every `__consumer_offsets` record in its `kafka-group-coordinator` jar
`records/generated/<record>/v<N>/<key|value>.py`; each folder gets an `index.py` listing
what it holds. `--check` writes nothing and exits 1 if the files on disk differ from what
the jars give (the unit tests run it). The jars come from Maven Central through
`mvn dependency:get` (into ~/.m2).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from coordinator.protocol.messagegen.compare import kio_class
from coordinator.protocol.messagegen.render import RECORD_KINDS, api_module, module_kind, render
from coordinator.protocol.messagegen.schema import read_jar

KAFKA_VERSION = "4.4.0"
ROOT = Path(__file__).resolve().parents[3]
OUT = ROOT / "coordinator" / "protocol" / "messages"
RECORDS_OUT = ROOT / "records" / "generated"


def kafka_jar(artifact: str = "kafka-clients", version: str = KAFKA_VERSION) -> Path:
    """The jar in the local Maven repository, fetched from Maven Central when absent."""
    jar = (Path.home() / ".m2/repository/org/apache/kafka" / artifact / version
           / f"{artifact}-{version}.jar")
    if not jar.exists():
        subprocess.run(["mvn", "-q", "dependency:get", "-Dtransitive=false",
                        f"-Dartifact=org.apache.kafka:{artifact}:{version}"], check=True)
    return jar


def generated_files(jar: Path) -> dict[Path, str]:
    """Relative path -> source, for every version kio lacks; plus the index."""
    files: dict[Path, str] = {}
    index: list[str] = []
    for message in read_jar(jar):
        if message.type not in ("request", "response"):
            continue
        api = api_module(message)
        for version in message.versions():
            if kio_class(message, version) is not None:
                continue
            files[Path(api) / f"v{version}" / f"{message.type}.py"] = render(message, version)
            index.append(f"    ({api!r}, {version}, {message.type!r}),")
    _packages(files)
    files[Path("index.py")] = (
        f'"""(api, version, kind) generated from Kafka {KAFKA_VERSION} because kio lacks them."""\n\n'
        "GENERATED = frozenset({\n" + "\n".join(sorted(index)) + "\n})\n")
    return files


def record_files(jar: Path) -> dict[Path, str]:
    """Relative path -> source, for every version of every `__consumer_offsets` record."""
    files: dict[Path, str] = {}
    index: list[str] = []
    for message in read_jar(jar):
        if message.type not in RECORD_KINDS:
            continue
        name, kind = api_module(message), module_kind(message)
        for version in message.versions():
            files[Path(name) / f"v{version}" / f"{kind}.py"] = render(message, version)
            index.append(f"    ({message.api_key}, {name!r}, {kind!r}, {version}),")
    _packages(files)
    files[Path("__init__.py")] = (
        f'"""`__consumer_offsets` record classes generated from Kafka {KAFKA_VERSION}\'s\n'
        "kafka-group-coordinator jar by coordinator.protocol.messagegen (docs/design/messages.md).\n"
        '"""\n')
    files[Path("index.py")] = (
        '"""(record type, module, key or value, version) of every generated record class."""\n\n'
        "RECORDS = frozenset({\n" + "\n".join(sorted(index)) + "\n})\n")
    return files


def _packages(files: dict[Path, str]) -> None:
    for package in {p.parent for p in files} | {p.parent.parent for p in files}:
        if package != Path("."):
            files[package / "__init__.py"] = ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coordinator.protocol.messagegen")
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    args = parser.parse_args(argv)
    outputs = {OUT / rel: source for rel, source in generated_files(kafka_jar()).items()}
    outputs |= {RECORDS_OUT / rel: source
                for rel, source in record_files(kafka_jar("kafka-group-coordinator")).items()}
    stale = []
    for path, source in sorted(outputs.items()):
        current = path.read_text() if path.exists() else None
        if current == source:
            continue
        stale.append(path.relative_to(ROOT))
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(source)
            print(f"wrote {path}", flush=True)
    if args.check and stale:
        print("out of date: " + ", ".join(map(str, stale)), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
