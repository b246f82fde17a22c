"""SDK for schedules (issue 14): a small HTTP client of the ``/schedules``
routes, signed like every other call when an appKey/appSecret is given
(``producers.signing.PlaitAuth``).

    client = ScheduleClient("https://plait.example", app_key="crm-app", app_secret="...")
    sch = client.create({"name": "weekly", "trigger": {"cron": "0 6 * * 1",
                         "timeZone": "Europe/Berlin"}, "action": {"export": spec}})
    client.trigger(sch["id"]); client.get(sch["id"])["nextFireTimes"]

Every method returns the envelope's ``data``; a 4xx/5xx raises
:class:`ScheduleError` carrying the status and the envelope (its
``data.errors`` name the fields).
"""
from __future__ import annotations

from typing import Any

import httpx

from plait.errors import PlaitError
from producers.signing import PlaitAuth


class ScheduleError(PlaitError):
    """The API refused a schedule call. ``status``: HTTP status; ``body``: the envelope."""

    def __init__(self, status: int, body: Any) -> None:
        message = body.get("message") if isinstance(body, dict) else str(body)[:200]
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.body = body


class ScheduleClient:
    """``/schedules`` over HTTP.

    Args:
        api_url: the API base URL.
        app_key, app_secret: the caller's credentials (signed requests); omit
            both for an API in open mode.
        sys_code: open mode only: whose schedules to list/read (``sysCode`` query).
        client: an ``httpx.Client`` to use (tests); one is created otherwise.
    """

    def __init__(self, api_url: str, app_key: str | None = None, app_secret: str | None = None,
                 sys_code: str | None = None, client: httpx.Client | None = None,
                 timeout: float = 10.0) -> None:
        auth = PlaitAuth(app_key, app_secret) if app_key and app_secret else None
        self.http = client or httpx.Client(base_url=api_url.rstrip("/"), auth=auth,
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
        """``GET /schedules``."""
        return self._call("GET", "/schedules")["schedules"]

    def get(self, schedule_id: str) -> dict[str, Any]:
        """``GET /schedules/{id}``: definition, next 5 fire times, last runs, counters."""
        return self._call("GET", f"/schedules/{schedule_id}")

    def update(self, schedule_id: str, **fields: Any) -> dict[str, Any]:
        """``PATCH /schedules/{id}`` with ``fields`` (camelCase)."""
        return self._call("PATCH", f"/schedules/{schedule_id}", fields)

    def pause(self, schedule_id: str, note: str | None = None) -> dict[str, Any]:
        """Pause with a note."""
        return self.update(schedule_id, paused=True, note=note)

    def resume(self, schedule_id: str) -> dict[str, Any]:
        """Resume."""
        return self.update(schedule_id, paused=False)

    def delete(self, schedule_id: str) -> dict[str, Any]:
        """``DELETE /schedules/{id}``."""
        return self._call("DELETE", f"/schedules/{schedule_id}")

    def trigger(self, schedule_id: str) -> dict[str, Any]:
        """``POST /schedules/{id}/trigger``: run now (slot = now)."""
        return self._call("POST", f"/schedules/{schedule_id}/trigger")

    def backfill(self, schedule_id: str, start: str, end: str) -> dict[str, Any]:
        """``POST /schedules/{id}/backfill`` for RFC 3339 ``start``..``end``."""
        return self._call("POST", f"/schedules/{schedule_id}/backfill",
                          {"start": start, "end": end})

    def close(self) -> None:
        """Close the HTTP client."""
        self.http.close()
