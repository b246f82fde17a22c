"""SDK of the ``/schedules`` routes, signed when an appKey/appSecret is given (else a bearer
``token`` when the API has only ``PLAIT_ALERTMANAGER_TOKEN``)::

    client = ScheduleClient("https://plait.example", app_key="crm-app", app_secret="...")
    sch = client.create({"name": "weekly", "trigger": {"cron": "0 6 * * 1"}, "action": {"export": spec}})

Each method returns the envelope's ``data``; a 4xx/5xx raises :class:`ScheduleError`."""
from __future__ import annotations

from typing import Any

import httpx

from plait.errors import PlaitError
from producers.signing import api_auth


class ScheduleError(PlaitError):
    """The API refused a schedule call. ``status``: HTTP status; ``body``: the envelope."""

    def __init__(self, status: int, body: Any) -> None:
        message = body.get("message") if isinstance(body, dict) else str(body)[:200]
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.body = body


class ScheduleClient:
    """``/schedules`` over HTTP; omit ``app_key``/``app_secret`` in open mode (then ``sys_code``
    picks whose schedules)."""

    def __init__(self, api_url: str, app_key: str | None = None, app_secret: str | None = None,
                 sys_code: str | None = None, client: httpx.Client | None = None,
                 timeout: float = 10.0, token: str | None = None) -> None:
        self.http = client or httpx.Client(base_url=api_url.rstrip("/"),
                                           auth=api_auth(app_key, app_secret, token),
                                           timeout=timeout)
        self.params = {"sysCode": sys_code} if sys_code else {}

    def _call(self, method: str, path: str, json: Any = None) -> Any:
        resp = self.http.request(method, path, json=json, params=self.params)
        try:
            body = resp.json()
        except ValueError:
            body = resp.text
        if resp.status_code >= 400:
            raise ScheduleError(resp.status_code, body)
        return body.get("data") if isinstance(body, dict) else body

    def create(self, schedule: dict[str, Any]) -> dict[str, Any]:
        """``POST /schedules``; returns the schedule (with ``id``, ``nextFireTimes``)."""
        return self._call("POST", "/schedules", schedule)

    def list(self) -> list[dict[str, Any]]:
        return self._call("GET", "/schedules")["schedules"]

    def get(self, schedule_id: str) -> dict[str, Any]:
        """``GET /schedules/{id}``: definition, next 5 fire times, last runs, counters."""
        return self._call("GET", f"/schedules/{schedule_id}")

    def update(self, schedule_id: str, **fields: Any) -> dict[str, Any]:
        """``PATCH /schedules/{id}`` with ``fields`` (camelCase)."""
        return self._call("PATCH", f"/schedules/{schedule_id}", fields)

    def pause(self, schedule_id: str, note: str | None = None) -> dict[str, Any]:
        return self.update(schedule_id, paused=True, note=note)

    def resume(self, schedule_id: str) -> dict[str, Any]:
        return self.update(schedule_id, paused=False)

    def delete(self, schedule_id: str) -> dict[str, Any]:
        return self._call("DELETE", f"/schedules/{schedule_id}")

    def trigger(self, schedule_id: str) -> dict[str, Any]:
        """``POST /schedules/{id}/trigger``: run now (slot = now)."""
        return self._call("POST", f"/schedules/{schedule_id}/trigger")

    def backfill(self, schedule_id: str, start: str, end: str) -> dict[str, Any]:
        """``POST /schedules/{id}/backfill`` for RFC 3339 ``start``..``end``."""
        return self._call("POST", f"/schedules/{schedule_id}/backfill",
                          {"start": start, "end": end})

    def close(self) -> None:
        self.http.close()
