"""Medians with min-max over runs, and the tables bench_rebalance.py prints."""
from __future__ import annotations

import statistics
from collections.abc import Sequence


def summary(values: Sequence[float | None], unit: str = "s", digits: int = 2) -> str:
    """'0.45 s (0.40-0.52)'; runs where the figure is missing are counted as such."""
    present = [v for v in values if v is not None]
    missing = len(values) - len(present)
    if not present:
        return "n/a" if not values else f"missing ({missing}/{len(values)})"
    med = statistics.median(present)
    text = f"{med:.{digits}f} {unit}"
    if len(present) > 1:
        text += f" ({min(present):.{digits}f}-{max(present):.{digits}f})"
    if missing:
        text += f", missing in {missing}"
    return text


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table (it reads fine in a terminal too)."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
