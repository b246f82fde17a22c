"""The schedule SDK (producers.schedules) and `plait schedules` against the real app."""
from __future__ import annotations

import json

import pytest

import producers.schedules as sdk_module
from ops.cli import main
from producers.schedules import ScheduleClient, ScheduleError
from test_schedule_api import EXPORT, client  # noqa: F401  (fixture)

BODY = {"name": "weekly", "trigger": {"cron": "0 6 * * 1", "timeZone": "Europe/Berlin"},
        "action": {"export": EXPORT}}


def test_sdk_round_trip(client):  # noqa: F811
    sdk = ScheduleClient("http://testserver", client=client)
    sch = sdk.create(BODY)
    assert len(sch["nextFireTimes"]) == 5
    assert [s["id"] for s in sdk.list()] == [sch["id"]]
    assert sdk.pause(sch["id"], "holiday")["paused"] is True
    assert sdk.resume(sch["id"])["paused"] is False
    assert sdk.trigger(sch["id"])["slot"].endswith("Z")
    assert sdk.backfill(sch["id"], "2026-01-05T00:00:00Z", "2026-01-26T23:59:59Z")["slots"] == 4
    sdk.delete(sch["id"])
    with pytest.raises(ScheduleError) as err:
        sdk.get(sch["id"])
    assert err.value.status == 404
    with pytest.raises(ScheduleError) as err:
        sdk.create({**BODY, "policy": {"overlap": "never"}})
    assert err.value.status == 422


def test_cli_create_get_and_refusal(client, tmp_path, monkeypatch, capsys):  # noqa: F811
    class Unclosed:  # the fixture's client outlives each CLI call
        def __init__(self, **kw):
            pass

        def request(self, *a, **kw):
            return client.request(*a, **kw)

        def close(self):
            pass

    monkeypatch.setattr(sdk_module.httpx, "Client", Unclosed)

    def printed():
        out = capsys.readouterr().out
        return json.loads(out[out.index("{\n"):])

    path = tmp_path / "s.json"
    path.write_text(json.dumps(BODY))
    main(["schedules", "create", str(path), "--api", "http://testserver"])
    sid = printed()["id"]
    main(["schedules", "get", sid, "--api", "http://testserver"])
    assert printed()["id"] == sid
    path.write_text(json.dumps({**BODY, "policy": {"maxCatchup": -2}}))
    with pytest.raises(SystemExit) as exit_:
        main(["schedules", "create", str(path), "--api", "http://testserver"])
    assert "policy.maxCatchup" in str(exit_.value)
