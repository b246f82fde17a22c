"""Probe actions: HTTP GET / TCP connect checks; a change raises a
``TargetDown`` raw alert (``alerts.raw``, docs/alerting.md), asset = target."""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import httpx

from schedules.model import ProbeAction, ProbeTarget

RULE = "TargetDown"


@dataclass(frozen=True)
class Check:
    """One target's result: ``up``, a short ``detail``, ``elapsed`` seconds."""

    target: str
    up: bool
    detail: str
    elapsed: float


async def check(target: ProbeTarget, client: httpx.AsyncClient) -> Check:
    """Check one target; never raises (a failure is ``up=False`` with the reason)."""
    t0 = time.monotonic()
    try:
        if target.http:
            resp = await client.get(target.http, timeout=target.timeout)
            ok = resp.status_code == target.expectStatus
            detail = f"HTTP {resp.status_code}" + ("" if ok else f", expected {target.expectStatus}")
        else:
            host, _, port = (target.tcp or "").rpartition(":")
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)),
                                               target.timeout)
            writer.close()
            ok, detail = True, "connected"
    except (asyncio.TimeoutError, httpx.TimeoutException):
        ok, detail = False, f"no answer within {target.timeout:g} s"
    except (OSError, httpx.HTTPError) as exc:
        ok, detail = False, f"{type(exc).__name__}: {exc}"[:300]
    return Check(target.asset, ok, detail, time.monotonic() - t0)


async def run_probe(action: ProbeAction, client: httpx.AsyncClient) -> list[Check]:
    return list(await asyncio.gather(*(check(t, client) for t in action.targets)))


def alerts_for_changes(schedule_id: str, name: str, severity: str, checks: list[Check],
                       last: dict[str, str], now: float) -> list[dict]:
    """Raw alerts for targets changed since ``last`` (unknown counts as up)."""
    out = []
    for c in checks:
        before = last.get(c.target, "up")
        after = "up" if c.up else "down"
        if before == after:
            continue
        out.append({"rule": RULE, "asset": c.target, "severity": severity,
                    "status": "resolved" if c.up else "firing", "time": now,
                    "labels": {"schedule": schedule_id, "scheduleName": name},
                    "annotations": {"summary": f"{c.target} is {'up' if c.up else 'down'}",
                                    "detail": c.detail}})
    return out
