"""An alert storm through the whole Plait stack and through Alertmanager,
same machine, same run, same client, same receiver. Prints one JSON object
per line:

    {"bench": "alert_storm", "system": "alertmanager"|"plait", "group_by",
     "alerts", "accepted_per_s", "delivered_seconds", "delivered_per_s",
     "webhook_posts", "cpu_s", "cpu_s_per_1000_alerts", "cpu_s_by_process",
     "rss_mb_before", "rss_mb_by_process_before", "rss_mb_open", "bytes_per_open_alert",
     "resolved_seconds", "resolve_webhook_posts", "rss_mb_resolved",
     "rss_mb_by_process_resolved", "rss_mb_settled", "rss_mb_by_process_settled", ...}
    {"bench": "alert_storm_ratio", "group_by", "plait_per_alertmanager": {...}}

The storm: ``--alerts`` distinct alerts (20 alertnames x alerts/20
instances; labels alertname, instance, job, severity, team; annotations
summary, description), POSTed to ``/api/v2/alerts`` 64 per POST
(Prometheus's batch) by 4 keep-alive senders (httpx), bodies encoded before
the clock starts, in a process apart from the receiver. One webhook
receiver (Alertmanager's webhook v4 body on both sides: Plait's receiver
has ``format: alertmanager``). Route
``group_wait 1s, group_interval 1s, repeat_interval 1h``; Plait's own
limits out of the way (bucket burst 10,000, ``batch_size`` 1,000, dedupe
cooldown 0).

- accepted: alerts / seconds from the first POST to the last answer;
- delivered: from the first POST until the receiver has seen every alert
  firing (``delivered_per_s`` = alerts / that);
- webhook_posts: POSTs the receiver got until then;
- cpu_s: user + system seconds of every server process over the same
  span, read with psutil before and after (Alertmanager; Plait's API,
  workers and Tansu broker, each with its children; ``cpu_s_by_process``
  splits it; the shared local Redis is not counted);
- memory: the servers' RSS before the storm, with every alert open
  (``bytes_per_open_alert`` = the growth / alerts), and after the same
  alerts were sent resolved (``endsAt`` in the past) and the receiver has
  seen every resolve; ``rss_mb_settled`` ``SETTLE_S`` seconds later, when
  each server has dropped the resolved alerts (Plait's worker then hands
  their memory back to the OS: ``plait.memory.TrimAfterShrink``).

``--profile DIR`` runs ``py-spy record`` (raw collapsed stacks, 100 Hz) on
Plait's API and workers over the firing phase and over the resolve phase
and prints their top frames (``alert_storm_profile`` lines); its overhead makes that run's other
figures slower. The steady 1,000-alerts/s latency run and its broker floor
are in ``bench/bench_alert_e2e.py``.

Usage: ``python bench/bench_alert_vs_alertmanager.py [--alerts 20000]
[--group-by alertname|alertname,instance|both] [--workers 1]
[--partitions 0] [--no-alertmanager] [--profile DIR]``
"""
from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import httpx
import yaml
from _alertbench import Sink, alertmanager, alertmanager_binary, cpu_seconds, rss_bytes, wait

from ops.stack import Stack

SHAPES = {"alertname": ["alertname"], "alertname,instance": ["alertname", "instance"]}
PER_POST, SENDERS, ALERTNAMES = 64, 4, 20
#: seconds from the last resolve at the receiver to ``rss_mb_settled``
SETTLE_S = 10
TIMING = {"group_wait": "1s", "group_interval": "1s", "repeat_interval": "1h"}


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat().replace("+00:00", "Z")


def storm(n: int, prefix: str = "Storm") -> list[dict]:
    """``n`` distinct Alertmanager alerts: ``ALERTNAMES`` alertnames x
    ``ceil(n / ALERTNAMES)`` instances, 5 labels, 2 annotations."""
    per = -(-n // ALERTNAMES)
    return [{"labels": {"alertname": f"{prefix}{i % ALERTNAMES:02d}",
                        "instance": f"host-{i // ALERTNAMES:05d}:9100", "job": "node",
                        "severity": "warning", "team": f"team-{i % 7}"},
             "annotations": {"summary": f"{prefix}{i % ALERTNAMES:02d} on host-{i // ALERTNAMES:05d}",
                             "description": "load above threshold for 5 minutes"}}
            for i in range(min(n, per * ALERTNAMES))]


def bodies(alerts: list[dict], starts: float, ends: float | None = None) -> list[bytes]:
    """JSON bodies of ``PER_POST`` alerts each with ``startsAt`` (and
    ``endsAt``: a past one resolves them)."""
    times = {"startsAt": rfc3339(starts), **({"endsAt": rfc3339(ends)} if ends else {})}
    return [json.dumps([{**a, **times} for a in alerts[i:i + PER_POST]]).encode()
            for i in range(0, len(alerts), PER_POST)]


async def _post_all(url: str, payloads: list[bytes]) -> None:
    todo = iter(payloads)
    limits = httpx.Limits(max_connections=SENDERS, max_keepalive_connections=SENDERS)
    async with httpx.AsyncClient(timeout=60, limits=limits,
                                 headers={"Content-Type": "application/json"}) as client:
        async def sender() -> None:
            for body in todo:  # the 4 senders share one iterator: a POST at a time each
                r = await client.post(url, content=body)
                if r.status_code != 200:
                    raise RuntimeError(f"POST {url}: {r.status_code} {r.text[:300]}")

        await asyncio.gather(*(sender() for _ in range(SENDERS)))


def _sender_process(url: str, payloads: list[bytes], out) -> None:
    t0 = time.monotonic()
    try:
        asyncio.run(_post_all(url, payloads))
    except Exception as e:  # handed to the parent, which raises it
        out.put(repr(e))
        return
    out.put((t0, time.monotonic()))


def post_all(base: str, payloads: list[bytes]) -> tuple[float, float]:
    """POST every body to ``base/api/v2/alerts`` with 4 keep-alive senders
    in a process of their own (so the receiver in this one does not slow
    them); ``time.monotonic()`` of the first POST and of the last answer
    (CLOCK_MONOTONIC, the same clock in every process)."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_sender_process, args=(f"{base}/api/v2/alerts", payloads, out))
    proc.start()
    try:
        got = out.get(timeout=900)
    finally:
        proc.join(30)
    if isinstance(got, str):
        raise RuntimeError(f"the senders failed: {got}")
    return got


def warm_up(base: str, sink: Sink) -> None:
    """One alert through to the receiver (joined consumers, open connections),
    then the sink's counts start from zero."""
    post_all(base, bodies(storm(1, "Warmup"), time.time()))
    wait(lambda: sink.count("firing") >= 1, 120, "the warm-up alert at the receiver")
    with sink.lock:
        sink.seen.clear()
        sink.messages = 0


def measure(system: str, shape: str, base: str, pids: dict[str, int], sink: Sink,
            n: int, on_phase=None) -> dict:
    """Send the storm firing, then resolved, to ``base``; the figures of
    one line (see the module docstring). ``pids``: name -> server process;
    ``on_phase(phase, event)``: called with ("firing" | "resolved",
    "start") before a phase's first POST and with "end" once the receiver
    has seen all of it (the profiler's hooks)."""
    alerts = storm(n)
    n = len(alerts)
    warm_up(base, sink)
    firing = bodies(alerts, time.time())
    rss0 = {k: rss_bytes(p) for k, p in pids.items()}
    cpu0 = {k: cpu_seconds(p) for k, p in pids.items()}
    if on_phase:
        on_phase("firing", "start")
    t0, t_accepted = post_all(base, firing)
    accepted = t_accepted - t0
    wait(lambda: sink.count("firing") >= n, 900, f"{n} firing alerts at the receiver", 0.05)
    delivered = sink.last_new - t0
    cpu1 = {k: cpu_seconds(p) for k, p in pids.items()}
    posts = sink.messages
    if on_phase:
        on_phase("firing", "end")
    rss_open = {k: rss_bytes(p) for k, p in pids.items()}
    if on_phase:
        on_phase("resolved", "start")
    t1, _ = post_all(base, bodies(alerts, time.time() - 60, time.time() - 1))
    wait(lambda: sink.count("resolved") >= n, 900, f"{n} resolves at the receiver", 0.05)
    if on_phase:
        on_phase("resolved", "end")
    resolved = sink.last_new - t1
    rss_end = {k: rss_bytes(p) for k, p in pids.items()}
    time.sleep(SETTLE_S)
    rss_settled = {k: rss_bytes(p) for k, p in pids.items()}
    cpu = {k: round(cpu1[k] - cpu0[k], 2) for k in pids}
    mb = 1 / 2**20
    return {"bench": "alert_storm", "system": system, "group_by": shape, "alerts": n,
            "per_post": PER_POST, "senders": SENDERS,
            "accepted_seconds": round(accepted, 2), "accepted_per_s": round(n / accepted, 1),
            "delivered_seconds": round(delivered, 2), "delivered_per_s": round(n / delivered, 1),
            "webhook_posts": posts, "cpu_s": round(sum(cpu.values()), 2),
            "cpu_s_per_1000_alerts": round(sum(cpu.values()) / n * 1000, 3),
            "cpu_s_by_process": cpu,
            "rss_mb_before": round(sum(rss0.values()) * mb, 1),
            "rss_mb_by_process_before": {k: round(v * mb, 1) for k, v in rss0.items()},
            "rss_mb_open": round(sum(rss_open.values()) * mb, 1),
            "bytes_per_open_alert": round((sum(rss_open.values()) - sum(rss0.values())) / n),
            "rss_mb_by_process_open": {k: round(v * mb, 1) for k, v in rss_open.items()},
            "resolved_seconds": round(resolved, 2),
            "resolve_webhook_posts": sink.messages - posts,
            "rss_mb_resolved": round(sum(rss_end.values()) * mb, 1),
            "rss_mb_by_process_resolved": {k: round(v * mb, 1) for k, v in rss_end.items()},
            "rss_mb_settled": round(sum(rss_settled.values()) * mb, 1),
            "rss_mb_by_process_settled": {k: round(v * mb, 1) for k, v in rss_settled.items()}}


def run_alertmanager(shape: str, n: int) -> dict:
    """The storm on a real Alertmanager grouping by ``shape``."""
    sink = Sink()
    config = {"route": {"receiver": "hook", "group_by": SHAPES[shape], **TIMING},
              "receivers": [{"name": "hook", "webhook_configs": [{"url": sink.url}]}]}
    try:
        with alertmanager(config) as (base, proc):
            return measure("alertmanager", shape, base, {"alertmanager": proc.pid}, sink, n)
    finally:
        sink.stop()


def plait_config(sink_url: str, shape: str) -> dict:
    """Plait's alerting YAML for the storm: one ``format: alertmanager``
    receiver, the route's ``group_by`` and timing as Alertmanager's, the
    bucket, batch and cooldown out of the way."""
    return {"receivers": [{"name": "hook", "url": sink_url, "format": "alertmanager",
                           "bucket": {"burst": 10_000, "refill_interval": "10ms"}}],
            "route": {"receiver": "hook"},
            "grouping": {"group_by": SHAPES[shape], "batch_size": 1000},
            "timing": TIMING,
            "dedupe": {"cooldown": 0}}


def run_plait(shape: str, n: int, workers: int, partitions: int,
              profile: Path | None = None) -> dict:
    """The storm on the whole Plait stack (API, ``workers`` alerting
    workers, Tansu) grouping by ``shape``."""
    sink = Sink()
    tmp = Path(tempfile.mkdtemp(prefix="plait-bench-vs-am-"))
    cfg = tmp / "alerting.yaml"
    cfg.write_text(yaml.safe_dump(plait_config(sink.url, shape)))
    rid = uuid.uuid4().hex[:8]
    env = {"PLAIT_TOPIC_PREFIX": f"bench-{rid}.", "PLAIT_APP_ID": f"bench-{rid}",
           "PLAIT_REDIS_PREFIX": f"bench-{rid}", "PLAIT_ALERTING_CONFIG": str(cfg),
           "PLAIT_LOG_LEVEL": "WARNING"}
    if partitions:
        env["PLAIT_PARTITIONS"] = str(partitions)
    stack = Stack(tmp / "stack", env, ephemeral_prefix=True)
    stack.start(workers=workers, api=True, demo_data_api=False, role="alerting")
    try:
        pids = {"api": stack.procs["api"].pid, "broker": stack.broker.proc.pid,
                **{n: p.pid for n, p in stack.workers().items()}}
        spy = Profiler(profile, shape, {k: v for k, v in pids.items() if k != "broker"}) \
            if profile else None
        line = measure("plait", shape, stack.api_url, pids, sink, n, spy.hook if spy else None)
        if spy:
            for (phase, name), frames in spy.top().items():
                print(json.dumps({"bench": "alert_storm_profile", "group_by": shape,
                                  "phase": phase, "process": name, **frames}), flush=True)
        return line
    finally:
        stack.stop()
        sink.stop()


class Profiler:
    """``py-spy record --format raw`` (collapsed stacks, 100 Hz,
    ``--nonblocking``) on each of ``pids`` (name -> pid) between a
    phase's "start" and "end"; files ``DIR/<group_by>-<phase>-<name>.txt``."""

    def __init__(self, out: Path, shape: str, pids: dict[str, int]) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.out, self.shape = out, shape.replace(",", "-")
        self.files: dict[tuple[str, str], Path] = {}
        self.pids, self.procs = pids, []

    def hook(self, phase: str, event: str) -> None:
        if event == "start":
            spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
            for k in self.pids:
                self.files[phase, k] = self.out / f"{self.shape}-{phase}-{k}.txt"
            self.procs = [subprocess.Popen([spy, "record", "--pid", str(pid), "--rate", "100",
                                            "--nonblocking", "--format", "raw",
                                            "-o", str(self.files[phase, k])],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                          for k, pid in self.pids.items()]
            time.sleep(1.0)  # attached before the first POST
            return
        for p in self.procs:
            p.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        for p in self.procs:
            p.wait(60)

    def top(self, n: int = 15) -> dict[tuple[str, str], dict]:
        """Per (phase, process): samples, and the ``n`` frames with the most samples
        on top of the stack (self) and anywhere in it (inclusive), as
        ``"function (file:line)": share`` of that process's samples."""
        return {k: top_frames(f.read_text(), n) for k, f in self.files.items() if f.exists()}


#: Stages of the alert path: part -> the function (prefix of a short frame) it runs under.
PARTS = {"api_post": "post_alerts (", "api_publish": "publish (api/",
         "router": "AlertingService.route_batch (", "funnel_apply": "FunnelRunner.apply_batch (",
         "funnel_effects": "AlertingService._effects_all (", "webhook": "AlertingService._deliver (",
         "kafka_fetch": "Fetcher.", "kafka_produce": "Sender.", "json_dumps": "dumps ("}


def top_frames(raw: str, n: int) -> dict:
    """The top frames of py-spy's raw (collapsed) output: lines
    ``frame;frame;... count``, outermost first. Idle frames (a thread
    waiting in ``select`` / ``epoll`` / ``sleep`` / a lock) are counted
    apart as ``idle_share``; ``parts`` is the inclusive share of each of
    :data:`PARTS` (which stage of the alert path the time is spent in)."""
    self_, incl, total, idle = Counter(), Counter(), 0, 0
    parts = Counter()
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames, c = stack.split(";"), int(count)
        total += c
        leaf = frames[-1]
        if any(w in leaf for w in ("select (", "poll (", "sleep (", "wait (", "acquire (",
                                   "_worker (concurrent")):
            idle += c
            continue
        self_[leaf] += c
        names = {_short(f) for f in frames}
        for f in names:
            incl[f] += c
        for part, fn in PARTS.items():
            if any(x.startswith(fn) or f".{fn}" in x for x in names):  # nested: a.<locals>.fn
                parts[part] += c
    busy = max(1, total - idle)
    return {"samples": total, "idle_share": round(idle / max(1, total), 3),
            "parts": {k: round(parts[k] / busy, 3) for k in PARTS if parts[k]},
            "self": {_short(f): round(c / busy, 3) for f, c in self_.most_common(n)},
            "inclusive": {f: round(c / busy, 3) for f, c in incl.most_common(n + 10)
                          if not f.startswith(("<module>", "run (", "_run_once", "run_forever",
                                               "run_until_complete", "main ("))}}


def _short(frame: str) -> str:
    """``func (/long/path/pkg/mod.py:12)`` -> ``func (pkg/mod.py)``: lines
    dropped so one function sums over its lines."""
    func, _, where = frame.partition(" (")
    path = where.rstrip(")").rpartition(":")[0] or where.rstrip(")")
    parts = path.split("/")
    return f"{func} ({'/'.join(parts[-2:])})"


def ratios(am: dict, plait: dict) -> dict:
    """Plait's figure over Alertmanager's, each key of the same run."""
    keys = ("accepted_per_s", "delivered_per_s", "webhook_posts", "cpu_s_per_1000_alerts",
            "bytes_per_open_alert", "rss_mb_resolved", "rss_mb_settled")
    return {"bench": "alert_storm_ratio", "group_by": plait["group_by"], "alerts": plait["alerts"],
            "plait_per_alertmanager": {k: round(plait[k] / am[k], 3) if am.get(k) else None
                                       for k in keys}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--alerts", type=int, default=20_000, help="distinct alerts (20000, 50000)")
    ap.add_argument("--group-by", choices=[*SHAPES, "both"], default="both")
    ap.add_argument("--workers", type=int, default=1, help="Plait's alerting worker processes")
    ap.add_argument("--partitions", type=int, default=0,
                    help="partitions of every topic (0: the settings' default)")
    ap.add_argument("--alertmanager", action=argparse.BooleanOptionalAction, default=True,
                    help="also run Alertmanager (when its binary is present)")
    ap.add_argument("--profile", type=Path, default=None,
                    help="py-spy the API and workers over Plait's firing and resolve phases; "
                         "files here")
    args = ap.parse_args(argv)
    if args.alerts < ALERTNAMES:
        ap.error(f"--alerts: at least {ALERTNAMES}")
    shapes = list(SHAPES) if args.group_by == "both" else [args.group_by]
    am_here = args.alertmanager and alertmanager_binary() is not None
    if args.alertmanager and not am_here:
        print(json.dumps({"bench": "alert_storm", "system": "alertmanager",
                          "skipped": "no alertmanager binary on PATH"}), flush=True)
    for shape in shapes:
        am = run_alertmanager(shape, args.alerts) if am_here else None
        if am:
            print(json.dumps(am), flush=True)
        plait = run_plait(shape, args.alerts, args.workers, args.partitions, args.profile)
        print(json.dumps(plait), flush=True)
        if am:
            print(json.dumps(ratios(am, plait)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
