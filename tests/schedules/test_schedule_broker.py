"""Schedules on the real broker and Redis: two workers, the one holding the
scheduler lease killed with SIGKILL mid-turn -> every slot fired exactly once
(one export task per slot, found by the slot's fingerprint)."""
from __future__ import annotations

import json
import time
import uuid

import httpx
import pytest
import redis

from plait import keys as K
from plait.spec import ExportSpec
from stack_env import wait_for

pytestmark = pytest.mark.integration
FAST = {"PLAIT_SCHEDULE_TICK_SECONDS": "0.2", "PLAIT_SCHEDULE_LEASE_SECONDS": "3",
        "PLAIT_STALE_AFTER_SECONDS": "4", "PLAIT_SWEEP_INTERVAL_SECONDS": "0.5",
        "PLAIT_HEARTBEAT_INTERVAL_SECONDS": "1", "PLAIT_SCHEDULE_MIN_INTERVAL_SECONDS": "1"}




def test_two_workers_kill_9_of_the_lease_holder_every_slot_fired_exactly_once(make_stack):
    stack = make_stack(workers=2, **FAST)
    r = redis.Redis.from_url(stack.env["PLAIT_REDIS_URL"], decode_responses=True)
    prefix = stack.env["PLAIT_REDIS_PREFIX"]
    export = {"sysCode": "tests", "bizType": "seq", "userId": "alice",
              "dataConfig": {"dataApiUrl": f"{stack.demo_data_api}/data", "pageSize": 20,
                             "queryConditions": {"dataset": "seq", "rows": 20,
                                                 "tag": uuid.uuid4().hex}},
              "documentConfig": {"fileName": "tick", "fileFormat": "csv"}}
    anchor = time.time() + 2
    anchor_iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(int(anchor))) + "Z"
    # given a 1 s export schedule on two workers
    resp = httpx.post(f"{stack.api_url}/schedules", json={
        "name": "tick", "trigger": {"interval": 1, "anchor": anchor_iso},
        "action": {"export": export},
        "policy": {"overlap": "allow", "grace": 60, "maxCatchup": 100}}, timeout=10)
    assert resp.status_code == 201, resp.text
    sid = resp.json()["data"]["id"]
    first = int(anchor) * 1000

    def fired_slots() -> list[int]:
        return sorted(int(k.rsplit(":", 1)[1]) for k in
                      r.scan_iter(match=f"{K.schedule_slot(prefix, sid, 0)[:-1]}*", count=1000))

    wait_for(lambda: len(fired_slots()) >= 3, 30, "three slots fired")
    # when the worker holding the scheduler lease is killed with SIGKILL mid-turn
    pids = {p.pid: name for name, p in stack.workers().items()}
    # the lease is held only during a turn (a few ms, ~10 turns a second):
    # polled every 50 ms, a whole run of turns could fall between two looks
    # (seen once in CI); every 1 ms, any turn of 1 ms or more is seen
    owner = wait_for(lambda: r.get(K.schedule_owner(prefix)), 30, "a scheduler turn",
                     every=0.001)
    victim = pids[int(owner.rsplit(":", 1)[1])]
    stack.kill(victim)
    killed_at = time.time()
    mid_turn = r.get(K.schedule_owner(prefix)) == owner  # its lease was never released
    # then the other worker takes over and slots keep firing after the lease ran out
    wait_for(lambda: fired_slots() and fired_slots()[-1] / 1000 > killed_at + 5, 60,
             "slots after the kill")
    httpx.patch(f"{stack.api_url}/schedules/{sid}", json={"paused": True}, timeout=10)
    last = fired_slots()[-1]
    expected = list(range(first, last + 1, 1000))

    def all_marked():
        claims = {s: json.loads(r.get(K.schedule_slot(prefix, sid, s)) or "{}") for s in expected}
        return claims if all(c.get("state") == "fired" for c in claims.values()) else None

    claims = wait_for(all_marked, 30, "every slot marked fired")
    # every slot of the grid from the first to the last: claimed once, one task each
    assert fired_slots()[:len(expected)] == expected
    spec = ExportSpec.model_validate(export)
    tasks = [json.loads(r.get(K.task(prefix, t)) or "{}")
             for t in r.zrange(K.caller_tasks(prefix, "tests"), 0, -1)]
    by_fp: dict[str, list[str]] = {}
    for t in tasks:
        by_fp.setdefault(t.get("fingerprint"), []).append(t["taskId"])
    for s in expected:
        ids = by_fp.get(spec.fingerprint(slot=f"{sid}:{s}"), [])
        assert ids == [claims[s]["ref"]], (s, ids)
    assert len(tasks) == len(fired_slots())
    state = json.loads(r.get(K.schedule_state(prefix, sid)))
    assert state["counters"]["skipped_missed"] == 0 and state["counters"]["skipped_overlap"] == 0
    print(f"\n{len(expected)} slots, killed {victim} (lease holder, mid-turn: {mid_turn}), "
          f"tasks {len(tasks)}, fired counter {state['counters']['fired']}")


def test_export_schedule_with_notify_url_posts_the_final_status_once(make_stack):
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from alerting.delivery import verify_signature

    got: list[tuple[dict, bytes]] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            got.append((dict(self.headers), body))
            self.send_response(503 if len(got) == 1 else 200)  # the first attempt fails
            self.end_headers()

        def log_message(self, *a):
            pass

    server = HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        stack = make_stack(workers=1, **FAST)
        export = {"sysCode": "tests", "bizType": "seq", "userId": "alice",
                  "dataConfig": {"dataApiUrl": f"{stack.demo_data_api}/data", "pageSize": 50,
                                 "queryConditions": {"dataset": "seq", "rows": 50,
                                                     "tag": uuid.uuid4().hex}},
                  "documentConfig": {"fileName": "weekly", "fileFormat": "csv"},
                  "jobConfig": {"notifyUrl": f"http://127.0.0.1:{server.server_port}/done"}}
        # given an export schedule far from its next slot, triggered by hand
        sid = httpx.post(f"{stack.api_url}/schedules", json={
            "name": "weekly", "trigger": {"cron": "0 6 * * 1", "timeZone": "Europe/Berlin"},
            "action": {"export": export}}, timeout=10).json()["data"]["id"]
        assert httpx.post(f"{stack.api_url}/schedules/{sid}/trigger", timeout=10).status_code == 202

        # then the run succeeds and the webhook gets the final status (retried after a 503)
        def succeeded():
            runs = httpx.get(f"{stack.api_url}/schedules/{sid}", timeout=10).json()["data"]
            return runs if runs["counters"]["succeeded"] == 1 else None

        sch = wait_for(succeeded, 90, "the triggered run to succeed")
        assert sch["lastRuns"][0]["kind"] == "manual" and sch["lastRuns"][0]["taskId"]
        wait_for(lambda: len(got) >= 2, 30, "the webhook retry")
        headers, body = got[-1]
        doc = json.loads(body)
        task_id = sch["lastRuns"][0]["taskId"]
        assert doc["taskId"] == task_id and doc["status"] == "SUCCESS"
        assert doc["file"]["rows"] == 50 and "/download/" in doc["file"]["url"]
        assert {h["Idempotency-Key"] for h, _ in got} == {f"{task_id}:SUCCESS"}
        assert verify_signature("plait-dev-secret-change-me", body, int(headers["X-Plait-Timestamp"]),
                                headers["X-Plait-Signature"], time.time())
        r = redis.Redis.from_url(stack.env["PLAIT_REDIS_URL"], decode_responses=True)
        assert wait_for(lambda: r.get(K.notify(stack.env["PLAIT_REDIS_PREFIX"], task_id,
                                               "SUCCESS")) == "sent", 10, "marker sent")
        assert len(got) == 2
    finally:
        server.shutdown()
