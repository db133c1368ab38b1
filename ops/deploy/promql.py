"""A small PromQL evaluator for the subset kcoord's dashboard uses, over scraped samples.

It exists so the docs can show the dashboard's panels from a real run without a
Prometheus (ops/deploy/render_dashboard.py). Rules:
- the subset: selectors with `=`, `!=`, `=~`, `!~` matchers (regexes fully anchored, as
  Prometheus's); `rate`, `irate`, `increase` over a range; `histogram_quantile`;
  `sum`/`min`/`max`/`avg`/`count` with `by`/`without` (before or after the argument);
  number literals and `+ - * /` between a vector and a number or two numbers;
- anything else (other functions, `offset`, `@`, vector-vector operators, subqueries)
  raises `Unsupported` naming it: a panel is never drawn from a query read differently
  from how Prometheus reads it;
- semantics follow Prometheus's documented behaviour: a series is current at time t only if
  the latest scrape at or before t returned it (staleness); range selectors take samples in
  (t - range, t]; `rate`/`increase` correct counter resets and extrapolate to the range's
  edges as Prometheus's extrapolatedRate does; `histogram_quantile` interpolates linearly
  inside the bucket, returns the lower bucket's bound for the +Inf bucket, NaN without
  observations; functions and aggregations drop the metric name.
"""
from __future__ import annotations

import bisect
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

Labels = tuple[tuple[str, str], ...]       # sorted (name, value) pairs; "__name__" for the metric
Vector = dict[Labels, float]


class Unsupported(ValueError):
    """A query outside the subset; the message names the construct and where it is."""


# --- the samples --------------------------------------------------------------------------

@dataclass
class Store:
    """Samples of every scrape: scrape time -> the series it returned."""
    scrape_times: list[float] = field(default_factory=list)
    series: dict[Labels, tuple[list[float], list[float]]] = field(default_factory=dict)

    def add_scrape(self, t: float, samples: Iterable[tuple[Mapping[str, str], float]]) -> None:
        if self.scrape_times and t <= self.scrape_times[-1]:
            raise ValueError(f"scrape at {t} is not after the previous one at {self.scrape_times[-1]}")
        self.scrape_times.append(t)
        for labels, value in samples:
            times, values = self.series.setdefault(tuple(sorted(labels.items())), ([], []))
            times.append(t)
            values.append(value)

    def current(self, t: float) -> Iterable[tuple[Labels, float]]:
        """Each series' sample from the latest scrape at or before t (if it returned it)."""
        i = bisect.bisect_right(self.scrape_times, t) - 1
        if i < 0:
            return
        at = self.scrape_times[i]
        for labels, (times, values) in self.series.items():
            if times and times[-1] >= at:
                j = bisect.bisect_left(times, at)
                if j < len(times) and times[j] == at:
                    yield labels, values[j]

    def window(self, t: float, seconds: float) -> Iterable[tuple[Labels, list[float], list[float]]]:
        for labels, (times, values) in self.series.items():
            lo, hi = bisect.bisect_right(times, t - seconds), bisect.bisect_right(times, t)
            if lo < hi:
                yield labels, times[lo:hi], values[lo:hi]


# --- parsing --------------------------------------------------------------------------------

# A duration before a number: "5m" is a duration, "0.99" and "60" are numbers.
_TOKEN = re.compile(r"""\s*(?:(?P<dur>(?:\d+(?:ms|s|m|h|d|w|y))+)(?![a-zA-Z0-9_])|(?P<num>\d+(?:\.\d+)?(?:e[+-]?\d+)?)
                        (?![a-zA-Z0-9_.])|(?P<id>[a-zA-Z_:][a-zA-Z0-9_:]*)|(?P<str>"(?:[^"\\]|\\.)*")
                        |(?P<op>=~|!~|!=|==|>=|<=|[-+*/%^(){}\[\],=<>@]))""", re.VERBOSE)
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
AGGREGATIONS = ("sum", "min", "max", "avg", "count")
RANGE_FUNCTIONS = ("rate", "irate", "increase")


def tokens(query: str) -> list[tuple[str, str, int]]:
    out, pos = [], 0
    while pos < len(query):
        if query[pos:].strip() == "":
            break
        m = _TOKEN.match(query, pos)
        if m is None or m.lastgroup is None:
            raise Unsupported(f"cannot read {query[pos:pos + 20].strip()!r} at character {pos}")
        out.append((m.lastgroup, m.group(m.lastgroup), m.start(m.lastgroup)))
        pos = m.end()
    return out


def duration_seconds(text: str) -> float:
    return sum(int(n) * _UNITS[u] for n, u in re.findall(r"(\d+)(ms|s|m|h|d|w|y)", text))


class _Parser:
    def __init__(self, query: str) -> None:
        self.query, self.toks, self.i = query, tokens(query), 0

    def peek(self, ahead: int = 0) -> tuple[str, str, int]:
        j = self.i + ahead
        return self.toks[j] if j < len(self.toks) else ("end", "", len(self.query))

    def take(self, value: str | None = None, kind: str | None = None) -> str:
        k, v, at = self.peek()
        if (value is not None and v != value) or (kind is not None and k != kind):
            raise Unsupported(f"expected {value or kind} at character {at} of {self.query!r}, found {v or 'the end'!r}")
        self.i += 1
        return v

    def parse(self) -> tuple:
        node = self.expr()
        k, v, at = self.peek()
        if k != "end":
            raise Unsupported(f"{v!r} at character {at} of {self.query!r} is outside the supported subset")
        return node

    def expr(self, level: int = 0) -> tuple:
        node = self.term() if level == 1 else self.expr(1)
        ops = ("+", "-") if level == 0 else ("*", "/")
        while self.peek()[1] in ops:
            op = self.take()
            node = ("binop", op, node, self.expr(1) if level == 0 else self.term())
        return node

    def term(self) -> tuple:
        k, v, at = self.peek()
        if k == "num":
            self.i += 1
            return ("num", float(v))
        if v == "(":
            self.take("(")
            node = self.expr()
            self.take(")")
            return node
        if k != "id":
            raise Unsupported(f"{v!r} at character {at} of {self.query!r} is outside the supported subset")
        if v in AGGREGATIONS:
            return self.aggregation()
        if self.peek(1)[1] == "(":
            return self.function()
        return self.selector()

    def grouping(self) -> tuple[str, tuple[str, ...]] | None:
        if self.peek()[1] not in ("by", "without"):
            return None
        mode = self.take()
        self.take("(")
        names = []
        while self.peek()[1] != ")":
            names.append(self.take(kind="id"))
            if self.peek()[1] == ",":
                self.take(",")
        self.take(")")
        return mode, tuple(names)

    def aggregation(self) -> tuple:
        op = self.take()
        grouping = self.grouping()
        self.take("(")
        arg = self.expr()
        self.take(")")
        after = self.grouping()
        if grouping and after:
            raise Unsupported(f"{op} has two groupings in {self.query!r}")
        return ("agg", op, grouping or after or ("by", ()), arg)

    def function(self) -> tuple:
        name, at = self.take(), self.peek()[2]
        self.take("(")
        if name in RANGE_FUNCTIONS:
            arg = self.selector()
            if arg[0] != "range":
                raise Unsupported(f"{name}() at character {at} needs a range selector")
            node: tuple = ("func", name, arg)
        elif name == "histogram_quantile":
            q = self.take(kind="num")
            self.take(",")
            node = ("quantile", float(q), self.expr())
        else:
            raise Unsupported(f"function {name}() is outside the supported subset")
        self.take(")")
        return node

    def selector(self) -> tuple:
        name = self.take(kind="id")
        matchers = [("__name__", "=", name)]
        if self.peek()[1] == "{":
            self.take("{")
            while self.peek()[1] != "}":
                label = self.take(kind="id")
                op = self.take()
                if op not in ("=", "!=", "=~", "!~"):
                    raise Unsupported(f"matcher operator {op!r} in {self.query!r}")
                value = self.take(kind="str")[1:-1].encode().decode("unicode_escape")
                matchers.append((label, op, value))
                if self.peek()[1] == ",":
                    self.take(",")
            self.take("}")
        if self.peek()[1] == "[":
            self.take("[")
            seconds = duration_seconds(self.take(kind="dur"))
            if self.peek()[1].startswith(":"):
                raise Unsupported("subqueries are outside the supported subset")
            self.take("]")
            return ("range", tuple(matchers), seconds)
        if self.peek()[1] in ("offset", "@"):
            raise Unsupported(f"{self.peek()[1]} modifiers are outside the supported subset")
        return ("select", tuple(matchers))


def parse(query: str) -> tuple:
    """The query's syntax tree; Unsupported for anything outside the subset."""
    return _Parser(query).parse()


# --- evaluation ---------------------------------------------------------------------------------

def matches(labels: Labels, matchers: tuple) -> bool:
    have = dict(labels)
    for name, op, value in matchers:
        v = have.get(name, "")
        ok = {"=": v == value, "!=": v != value,
              "=~": re.fullmatch(value, v) is not None, "!~": re.fullmatch(value, v) is None}[op]
        if not ok:
            return False
    return True


def _drop_name(labels: Labels) -> Labels:
    return tuple(p for p in labels if p[0] != "__name__")


def extrapolated(times: list[float], values: list[float], start: float, end: float, is_rate: bool) -> float | None:
    """Prometheus's extrapolatedRate for counters: None with fewer than two samples."""
    if len(times) < 2:
        return None
    result = values[-1] - values[0]
    for prev, cur in zip(values, values[1:]):
        if cur < prev:              # a counter reset: the counter restarted from 0
            result += prev
    to_start, to_end = times[0] - start, end - times[-1]
    sampled = times[-1] - times[0]
    average = sampled / (len(times) - 1)
    if result > 0 and values[0] >= 0:
        to_start = min(to_start, sampled * values[0] / result)   # a counter does not go below 0
    threshold = average * 1.1
    interval = sampled + (to_start if to_start < threshold else average / 2) \
        + (to_end if to_end < threshold else average / 2)
    result *= interval / sampled
    return result / (end - start) if is_rate else result


def instant_rate(times: list[float], values: list[float]) -> float | None:
    if len(times) < 2:
        return None
    last, prev = values[-1], values[-2]
    return (last if last < prev else last - prev) / (times[-1] - times[-2])


def quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    """buckets: (upper bound, cumulative count)."""
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    buckets = sorted(buckets)
    if len(buckets) < 2 or buckets[-1][0] != math.inf:
        return math.nan
    counts = [c for _, c in buckets]
    for i in range(1, len(counts)):       # Prometheus evens out non-monotonic counts
        counts[i] = max(counts[i], counts[i - 1])
    observations = counts[-1]
    if observations == 0:
        return math.nan
    rank = q * observations
    b = next(i for i, c in enumerate(counts) if c >= rank)
    if b == len(buckets) - 1:
        return buckets[-2][0]
    if b == 0 and buckets[0][0] <= 0:
        return buckets[0][0]
    start = 0.0 if b == 0 else buckets[b - 1][0]
    below = 0.0 if b == 0 else counts[b - 1]
    return start + (buckets[b][0] - start) * (rank - below) / (counts[b] - below)


def evaluate(node: tuple, store: Store, t: float) -> Vector | float:
    kind = node[0]
    if kind == "num":
        return node[1]
    if kind == "select":
        return {labels: v for labels, v in store.current(t) if matches(labels, node[1])}
    if kind == "range":
        raise Unsupported("a range selector outside rate/irate/increase is outside the supported subset")
    if kind == "func":
        name, (_, matchers, seconds) = node[1], node[2]
        out: Vector = {}
        for labels, times, values in store.window(t, seconds):
            if matches(labels, matchers):
                v = instant_rate(times, values) if name == "irate" else \
                    extrapolated(times, values, t - seconds, t, name == "rate")
                if v is not None:
                    out[_drop_name(labels)] = v
        return out
    if kind == "quantile":
        vector = _vector(evaluate(node[2], store, t), "histogram_quantile")
        groups: dict[Labels, list[tuple[float, float]]] = {}
        for labels, v in vector.items():
            le = dict(labels).get("le")
            if le is not None:
                rest = tuple(p for p in labels if p[0] not in ("le", "__name__"))
                groups.setdefault(rest, []).append((float(le), v))
        return {labels: quantile(node[1], b) for labels, b in groups.items()}
    if kind == "agg":
        op, (mode, names), arg = node[1], node[2], node[3]
        grouped: dict[Labels, list[float]] = {}
        for labels, v in _vector(evaluate(arg, store, t), op).items():
            key = tuple(p for p in labels if (p[0] in names) == (mode == "by") and p[0] != "__name__")
            grouped.setdefault(key, []).append(v)
        fold = {"sum": sum, "min": min, "max": max, "count": len, "avg": lambda xs: sum(xs) / len(xs)}[op]
        return {k: float(fold(vs)) for k, vs in grouped.items()}
    if kind == "binop":
        op, left, right = node[1], evaluate(node[2], store, t), evaluate(node[3], store, t)
        if isinstance(left, dict) and isinstance(right, dict):
            raise Unsupported(f"{op} between two vectors is outside the supported subset")
        if isinstance(left, dict):
            return {_drop_name(k): _arith(op, v, right) for k, v in left.items()}    # type: ignore[arg-type]
        if isinstance(right, dict):
            return {_drop_name(k): _arith(op, left, v) for k, v in right.items()}
        return _arith(op, left, right)
    raise Unsupported(f"node {kind}")


def _vector(value: Vector | float, where: str) -> Vector:
    if not isinstance(value, dict):
        raise Unsupported(f"{where} needs a vector, not the number {value}")
    return value


def _arith(op: str, a: float, b: float) -> float:
    if op == "/":
        return a / b if b else (math.nan if a == 0 else math.copysign(math.inf, a))
    return {"+": a + b, "-": a - b, "*": a * b}[op]


def legend(template: str, labels: Labels) -> str:
    """Grafana's legendFormat: {{name}} replaced by the label's value."""
    have = dict(labels)
    text = re.sub(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}", lambda m: have.get(m[1], ""), template)
    return text.strip() or ("{" + ", ".join(f'{k}="{v}"' for k, v in labels) + "}")
