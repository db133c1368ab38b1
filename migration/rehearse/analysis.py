"""Observations -> the rehearsal report (a JSON-able dict). Pure: no I/O, no clocks.

All times in the report are seconds since the rehearsal started (t0).
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from .observations import MemberLog, Observations, StepLog
from .plan import RehearsalPlan, expected_conversions
from .probe import GroupSample
from .producer import Delivered

REPORT_FORMAT = 1
EXAMPLES = 10


def _s(t_ns: int | None, t0_ns: int) -> float | None:
    return None if t_ns is None else round((t_ns - t0_ns) / 1e9, 3)


def _offsets(o: dict[int, int] | None) -> dict[str, int] | None:
    return None if o is None else {str(p): o[p] for p in sorted(o)}


# --------------------------------------------------------------------------- records
def record_accounting(obs: Observations, run_id: str) -> dict[str, Any]:
    produced = {d.value for d in obs.delivered}
    seen: Counter[str] = Counter()
    by: dict[str, list[str]] = defaultdict(list)
    prefix = f"{run_id}-"
    for m in obs.members:
        for e in m.events:
            v = e.get("value")
            if e["event"] == "record" and isinstance(v, str) and v.startswith(prefix):
                seen[v] += 1
                by[v].append(f"m{m.slot}.{m.incarnation}@{e['partition']}:{e['offset']}")
    lost = sorted(produced - seen.keys())
    dups = sorted(v for v, n in seen.items() if n > 1)
    return {
        "produced": len(produced),
        "consumed_unique": len(produced & seen.keys()),
        "consumed_total": sum(seen.values()),
        "duplicates": sum(n - 1 for n in seen.values()),
        "duplicated_records": len(dups),
        "duplicate_examples": [{"value": v, "consumed_by": by[v]} for v in dups[:EXAMPLES]],
        "lost": len(lost),
        "lost_examples": lost[:EXAMPLES],
        "consumed_not_acknowledged": len(seen.keys() - produced),
        "producer_failures": len(obs.producer_failures),
        "producer_failure_examples": [list(f) for f in obs.producer_failures[:EXAMPLES]],
    }


def end_offsets(delivered: Iterable[Delivered]) -> dict[int, int]:
    """Per partition, one past the last delivered offset. A delivery report without an offset
    (librdkafka's idempotent producer reports a retried record the broker had already written,
    a duplicate sequence, as delivered with no offset) says nothing about the end."""
    end: dict[int, int] = {}
    for d in delivered:
        if d.offset is not None and d.offset >= 0:
            end[d.partition] = max(end.get(d.partition, 0), d.offset + 1)
    return end


# ----------------------------------------------------------------------- group type
def observed_conversions(samples: list[GroupSample]) -> list[dict[str, Any]]:
    """Type flips seen by the probe: the conversion happened between `last_old` and `first_new`.

    Samples with an error are left out, a torn one included (group_admin.GroupAdmin._describe:
    the group's type changed between ListGroups and the describe on every attempt); they say
    nothing of the group's type, so a flip is seen between the samples around them."""
    out = []
    prev: GroupSample | None = None
    for s in samples:
        if s.view.error or not s.view.group_type:
            continue
        if prev is not None and s.view.group_type != prev.view.group_type:
            out.append({"from": prev.view.group_type, "to": s.view.group_type, "last_old": prev, "first_new": s})
        prev = s
    return out


def _step_containing(steps: list[StepLog], t_ns: int) -> StepLog | None:
    for st in steps:
        if st.t_close_requested is not None and st.t_close_requested <= t_ns and (
                st.t_settled is None or t_ns <= st.t_settled):
            return st
    return None


def _sample_offsets_at_or_after(samples: list[GroupSample], t_ns: int) -> dict[int, int] | None:
    for s in samples:
        if s.t_ns >= t_ns and s.offsets is not None:
            return s.offsets
    return None


def _sample_offsets_at_or_before(samples: list[GroupSample], t_ns: int) -> dict[int, int] | None:
    found = None
    for s in samples:
        if s.t_ns > t_ns:
            break
        if s.offsets is not None:
            found = s.offsets
    return found


def regressions(before: dict[int, int] | None, after: dict[int, int] | None) -> list[dict[str, int]]:
    """Partitions whose committed offset is lower (or gone) after than before."""
    if before is None or after is None:
        return []
    return [{"partition": p, "before": o, "after": after.get(p, -1)}
            for p, o in sorted(before.items()) if after.get(p, -1) < o]


def conversions_report(obs: Observations, plan: RehearsalPlan) -> tuple[list[dict], dict[str, Any]]:
    t0 = obs.t0_ns
    seen = observed_conversions(obs.samples)
    expected = expected_conversions(plan)
    steps_by_index = {st.step.index: st for st in obs.steps}
    out = []
    for c in seen:
        last_old, first_new = c["last_old"], c["first_new"]
        step = _step_containing(obs.steps, first_new.t_ns)
        before = last_old.offsets or _sample_offsets_at_or_before(obs.samples, last_old.t_ns)
        settled_at = step.t_settled if step and step.t_settled else first_new.t_ns
        after = _sample_offsets_at_or_after(obs.samples, settled_at) or first_new.offsets
        immediate = first_new.offsets
        regs = regressions(before, after) + [r | {"when": "first sample after"} for r in regressions(before, immediate)]
        out.append({
            "from": c["from"], "to": c["to"],
            "observed_between_s": [_s(last_old.t_ns, t0), _s(first_new.t_ns, t0)],
            "epoch_before": last_old.view.group_epoch, "epoch_after": first_new.view.group_epoch,
            "members_before": len(last_old.view.members), "members_after": len(first_new.view.members),
            "during_step": step.step.index if step else None,
            "offsets_before": _offsets(before), "offsets_after": _offsets(after),
            "offset_regressions": regs,
        })
    # Do the flips match Kafka's triggers, one for one and in order?
    checks = []
    for i, exp in enumerate(expected):
        st = steps_by_index.get(exp["step"])
        got = out[i] if i < len(out) else None
        window = None
        ok = False
        if st is not None and st.t_close_requested is not None:
            if exp["trigger"] == "join":  # between the new member's start and the step settling
                lo, hi = st.t_spawned, st.t_settled
            else:  # while the last consumer-protocol member stops
                lo, hi = st.t_close_requested, st.t_closed
            window = [_s(lo, t0), _s(hi, t0)]
            if got is not None and got["to"] == exp["to"] and lo is not None and hi is not None:
                a, b = got["observed_between_s"]
                ok = b >= window[0] and a <= window[1]
        checks.append(exp | {"window_s": window, "observed_between_s": got["observed_between_s"] if got else None,
                             "as_expected": ok})
    type_check = {"expected": len(expected), "observed": len(out),
                  "ok": len(out) == len(expected) and all(c["as_expected"] for c in checks),
                  "conversions": checks}
    return out, type_check


def offset_decreases(samples: list[GroupSample], t0: int) -> list[dict[str, Any]]:
    """Any committed offset that went down between two samples, at any time."""
    last: dict[int, int] = {}
    out = []
    for s in samples:
        if s.offsets is None:
            continue
        for p, o in s.offsets.items():
            if p in last and o < last[p]:
                out.append({"partition": p, "before": last[p], "after": o, "at_s": _s(s.t_ns, t0)})
            last[p] = o
    return out


# ---------------------------------------------------------------------------- timelines
def group_timeline(samples: list[GroupSample], t0: int) -> list[dict[str, Any]]:
    """Change points of what the coordinator reports about the group."""
    out: list[dict[str, Any]] = []
    prev = None
    for s in samples:
        v = s.view
        key = (v.group_type, v.state, v.group_epoch, v.assignment_epoch, len(v.members), bool(v.error))
        if key != prev:
            out.append({"t": _s(s.t_ns, t0), "type": v.group_type or None, "state": v.state or None,
                        "group_epoch": v.group_epoch, "assignment_epoch": v.assignment_epoch,
                        "members": len(v.members), **({"error": v.error} if v.error else {})})
            prev = key
    return out


def _coordinator_view(samples: list[GroupSample], client_id: str, t0: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    prev = None
    for s in samples:
        if s.view.error:
            continue
        m = next((m for m in s.view.members if m.client_id == client_id), None)
        key = None if m is None else (m.protocol, m.member_epoch, m.partitions)
        if key != prev:
            out.append({"t": _s(s.t_ns, t0), "in_group": m is not None,
                        **({"protocol": m.protocol, "member_epoch": m.member_epoch,
                            "partitions": list(m.partitions)} if m else {})})
            prev = key
    return out


MEMBER_STATES = ("joining", "consuming", "rebalancing", "leaving")


def member_segments(m: MemberLog, t0: int, t_end: int) -> list[dict[str, Any]]:
    """The member process's own view: joining -> consuming/rebalancing -> leaving."""
    owned: set[int] = set()
    ever = False
    leaving = False
    points: list[tuple[int, str, tuple[int, ...]]] = []
    start = end = None
    for e in m.events:
        kind, t = e["event"], int(e["t"])
        if kind == "spawned":
            start = t
        elif kind in ("assigned", "revoked", "lost"):
            parts = {int(p) for _, p in e.get("partitions", ())}
            owned = owned | parts if kind == "assigned" else owned - parts
            ever = ever or bool(owned)
        elif kind == "close_requested":
            leaving = True
        elif kind == "exited":
            end = t
            continue
        else:
            continue
        state = "leaving" if leaving else "consuming" if owned else "rebalancing" if ever else "joining"
        points.append((t, state, tuple(sorted(owned))))
    if start is None:
        return []
    end = end if end is not None else t_end
    segs: list[dict[str, Any]] = []
    for i, (t, state, parts) in enumerate(points):
        nxt = points[i + 1][0] if i + 1 < len(points) else end
        if segs and segs[-1]["state"] == state and segs[-1]["partitions"] == list(parts):
            segs[-1]["to"] = _s(nxt, t0)
            continue
        segs.append({"from": _s(t, t0), "to": _s(nxt, t0), "state": state, "partitions": list(parts)})
    return [s for s in segs if s["to"] is None or s["from"] is None or s["to"] >= s["from"]]


def member_timeline(obs: Observations) -> list[dict[str, Any]]:
    t0, t_end = obs.t0_ns, obs.t_end or max((int(e["t"]) for m in obs.members for e in m.events), default=obs.t0_ns)
    out = []
    for m in obs.members:
        assigned = [e for e in m.events if e["event"] == "assigned"]
        errors = [e for e in m.events if e["event"] == "error"]
        out.append({
            "slot": m.slot, "incarnation": m.incarnation, "client_id": m.client_id, "protocol": m.protocol,
            "member_id": next((e.get("member_id") for e in reversed(assigned) if e.get("member_id")), None),
            "generations": sorted({e["generation"] for e in assigned if isinstance(e.get("generation"), int)}),
            "records": sum(1 for e in m.events if e["event"] == "record"),
            "errors": [{"t": _s(int(e["t"]), t0), "error": e.get("error"), "message": e.get("message"),
                        "fatal": bool(e.get("fatal"))} for e in errors[:EXAMPLES]],
            "segments": member_segments(m, t0, t_end),
            "coordinator": _coordinator_view(obs.samples, m.client_id, t0),
        })
    return out


def throughput(obs: Observations, run_id: str, bucket_s: float = 1.0) -> dict[str, Any]:
    """Records produced (acknowledged) and consumed per time bucket: stalls show as gaps."""
    t0 = obs.t0_ns
    end = obs.t_end or t0
    n = max(1, int((end - t0) / 1e9 / bucket_s) + 1)
    produced, consumed = [0] * n, [0] * n

    def bucket(t_ns: int) -> int:
        return min(n - 1, max(0, int((t_ns - t0) / 1e9 / bucket_s)))

    for d in obs.delivered:
        produced[bucket(d.t_ns)] += 1
    prefix = f"{run_id}-"
    for m in obs.members:
        for e in m.events:
            if e["event"] == "record" and str(e.get("value", "")).startswith(prefix):
                consumed[bucket(int(e["t"]))] += 1
    return {"bucket_s": bucket_s, "produced": produced, "consumed": consumed}


# ---------------------------------------------------------------------------- the report
def probe_warnings(samples: list[GroupSample]) -> list[str]:
    """Both reports' warning when the probe had samples with an error, the torn ones among them
    (group_admin.GroupAdmin._describe: the group's listing moved between ListGroups and the
    describe on every attempt). The checks leave such samples out, so they judge the group
    from fewer of its states; a warning, not a failure, as the other samples may show every
    state the checks need, but a reader should know a state may have gone unseen."""
    errors = [s for s in samples if s.view.error]
    if not errors:
        return []
    torn = sum(1 for s in errors if s.view.torn)
    return [f"{len(errors)} of {len(samples)} probe samples had an error ({torn} torn by the group's listing "
            f"moving on every attempt) and were left out of the checks (see probe)"]


def analyse(obs: Observations, plan: RehearsalPlan) -> dict[str, Any]:
    t0 = obs.t0_ns
    records = record_accounting(obs, plan.run_id)
    conversions, type_check = conversions_report(obs, plan)
    decreases = offset_decreases(obs.samples, t0)
    end = end_offsets(obs.delivered)
    final = obs.final_offsets or {}
    behind = [{"partition": p, "committed": final.get(p, -1), "end": e}
              for p, e in sorted(end.items()) if final.get(p, -1) < e]
    failures = []
    if records["lost"]:
        failures.append(f"{records['lost']} records produced but never consumed")
    for c in conversions:
        for r in c["offset_regressions"]:
            failures.append(f"{c['from']}->{c['to']} conversion: partition {r['partition']} committed offset "
                            f"{r['before']} before, {r['after']} after")
    for d in decreases:
        failures.append(f"partition {d['partition']} committed offset went down {d['before']} -> {d['after']} "
                        f"at {d['at_s']}s")
    failures += obs.errors
    warnings = []
    if not type_check["ok"]:
        warnings.append(f"group type changes differ from Kafka's triggers: expected {type_check['expected']}, "
                        f"observed {type_check['observed']} (see type_changes)")
    if behind:
        warnings.append(f"final committed offsets behind the end on {len(behind)} partitions")
    if records["duplicates"]:
        warnings.append(f"{records['duplicates']} duplicate deliveries (at-least-once redelivery)")
    warnings += probe_warnings(obs.samples)
    probe_errors = [s for s in obs.samples if s.view.error]
    return {
        "format": REPORT_FORMAT,
        "verdict": "fail" if failures else "pass",
        "failures": failures,
        "warnings": warnings,
        "run": {"direction": plan.direction, "round_trip": plan.round_trip, "client": plan.client,
                "members": plan.members, "group": obs.group, "topic": obs.topic, "partitions": obs.partitions,
                "bootstrap": plan.bootstrap, "run_id": plan.run_id, "started_at": obs.started_at,
                "duration_s": _s(obs.t_end, t0), "first_stable_s": _s(obs.t_first_stable, t0),
                "produce_stopped_s": _s(obs.t_produce_stopped, t0)},
        "plan": obs.plan,
        "records": records,
        "conversions": conversions,
        "type_changes": type_check,
        "offsets": {"end": _offsets(end), "final_committed": _offsets(final), "behind_at_end": behind,
                    "decreases": decreases},
        "steps": [{"index": st.step.index, "slot": st.step.slot, "from": st.step.from_protocol,
                   "to": st.step.to_protocol, "close_requested_s": _s(st.t_close_requested, t0),
                   "closed_s": _s(st.t_closed, t0), "spawned_s": _s(st.t_spawned, t0),
                   "settled_s": _s(st.t_settled, t0),
                   "settle_s": None if st.t_settled is None or st.t_spawned is None
                   else round((st.t_settled - st.t_spawned) / 1e9, 3),
                   "offsets_before": _offsets(st.offsets_before), "offsets_after": _offsets(st.offsets_after)}
                  for st in obs.steps],
        "throughput": throughput(obs, plan.run_id),
        "group_timeline": group_timeline(obs.samples, t0),
        "members": member_timeline(obs),
        "probe": {"samples": len(obs.samples), "errors": len(probe_errors),
                  "torn": sum(1 for s in probe_errors if s.view.torn),
                  "error_examples": sorted({s.view.error for s in probe_errors})[:EXAMPLES]},
        "errors": list(obs.errors),
    }
