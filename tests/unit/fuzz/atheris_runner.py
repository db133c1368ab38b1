"""Runs several atheris harnesses (fuzz/atheris_*.py) from one instrumented import.

    python tests/unit/fuzz/atheris_runner.py OUT_DIR HARNESS_PATH... -- LIBFUZZER_FLAG...

Rules:
- every module a harness imports is loaded here under atheris' finder, so what any harness
  instruments alone is instrumented here too (a superset; instrumentation only guides). The
  instrumentation of the package (~700 modules) costs seconds per harness, once here;
- each harness then fuzzes in a child of its own (fork: libFuzzer runs once per process and
  exits), run as `python <harness> <flags>` runs it (runpy, as __main__; its imports are
  loaded already), in OUT_DIR/<name>/ (its
  artifacts) with its output in OUT_DIR/<name>.log and its exit status in OUT_DIR/<name>.rc;
- the children run one after another, as the harnesses ran one per subprocess before.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import runpy
import sys
from pathlib import Path

import atheris


def load(path: Path) -> None:
    """Import a harness as a module (not as __main__, so it does not fuzz yet), every import
    of it instrumented: its own `instrument_imports()` is a no-op meanwhile, because leaving
    that block removes the finder (atheris' HookManager), and what a later harness imports
    inside its block may be loaded already by an earlier one's imports around its block."""
    spec = importlib.util.spec_from_file_location(f"_harness_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    real = atheris.instrument_imports
    with real():
        atheris.instrument_imports = lambda *args, **kwargs: contextlib.nullcontext()
        try:
            spec.loader.exec_module(module)
        finally:
            atheris.instrument_imports = real


def fuzz_in_child(path: Path, flags: list[str], out: Path) -> int:
    work = out / path.stem
    work.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        try:
            log = os.open(out / f"{path.stem}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.chdir(work)
            sys.argv = [str(path), *flags, f"-artifact_prefix={work}/"]
            runpy.run_path(str(path), run_name="__main__")   # libFuzzer exits the process
        except SystemExit as e:
            os._exit(e.code if isinstance(e.code, int) else 1)
        except BaseException as e:  # noqa: BLE001 (the child reports, never returns into the parent's loop)
            print(f"harness {path.name} raised {e!r}", file=sys.stderr, flush=True)
            os._exit(3)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def main(argv: list[str]) -> int:
    split = argv.index("--")
    out, paths, flags = Path(argv[0]), [Path(p).resolve() for p in argv[1:split]], argv[split + 1:]
    for path in paths:
        load(path)
    for path in paths:
        (out / f"{path.stem}.rc").write_text(str(fuzz_in_child(path, flags, out)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
