"""`python -m coordinator.protocol.messagegen [--jar JAR] [--out DIR] [--check]`

Writes, for every request and response version in Kafka's `kafka-clients` jar that kio
does not have, `<out>/<api>/v<N>/<request|response>.py` (kio's layout), and
`<out>/index.py` listing them. `--check` writes nothing and exits 1 if the files on disk
differ from what the jar gives (the unit tests run it). The jar comes from Maven Central
through `mvn dependency:get` (into ~/.m2) unless `--jar` names one.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from coordinator.protocol.messagegen.compare import kio_class
from coordinator.protocol.messagegen.render import api_module, render
from coordinator.protocol.messagegen.schema import read_jar

KAFKA_VERSION = "4.4.0"
OUT = Path(__file__).resolve().parent.parent / "messages"


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
    packages = {p.parent for p in files} | {p.parent.parent for p in files}
    for package in packages:
        files[package / "__init__.py"] = ""
    files[Path("index.py")] = (
        f'"""(api, version, kind) generated from Kafka {KAFKA_VERSION} because kio lacks them."""\n\n'
        "GENERATED = frozenset({\n" + "\n".join(sorted(index)) + "\n})\n")
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coordinator.protocol.messagegen")
    parser.add_argument("--jar", type=Path, help=f"kafka-clients jar (default: {KAFKA_VERSION} from Maven)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    args = parser.parse_args(argv)
    jar = args.jar or kafka_jar()
    stale = []
    for rel, source in sorted(generated_files(jar).items()):
        path = args.out / rel
        current = path.read_text() if path.exists() else None
        if current == source:
            continue
        stale.append(rel)
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
