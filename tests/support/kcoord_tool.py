"""`kcoord <tool> ...` run inside the test's own process: the parser and the command of the
console script (coordinator/cli.py `build_parser`, each tool's `func`), its stdout and stderr
captured. A `python -m coordinator.cli` process costs 1.3-2.3 s of CPU importing kio and the
tools before it sends a request, and a test that polls a group's state through the tool starts
dozens of them (test_groups_cli: about 70). What the process adds, `main()`'s logging set-up
and exit code, stays covered where a test runs the console script itself (test_groups_cli's
`--export` runs, test_cluster_status, test_rehearse_cli)."""
from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout


def run_tool(*argv: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `kcoord *argv`, run here."""
    from coordinator.cli import build_parser

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            args = build_parser().parse_args(list(argv))
            code = int(args.func(args) or 0)
        except SystemExit as e:     # argparse's refusal or --help, as the console script exits
            code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
    return code, out.getvalue(), err.getvalue()
