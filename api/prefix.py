"""The API under a route prefix, as Alertmanager's ``--web.route-prefix``
(cmd/alertmanager/main.go): every route, ``/api/v2``, ``/-/healthy``,
``/-/ready``, ``/-/reload`` and the rest, answers under the prefix only;
``/`` redirects to it. The prefix defaults to the path of the external URL
(Alertmanager's ``--web.external-url``)."""
from __future__ import annotations

from typing import Any, Awaitable, Callable
from urllib.parse import urlsplit

Scope = dict[str, Any]
ASGIApp = Callable[[Scope, Callable, Callable], Awaitable[None]]


def route_prefix(prefix: str, external_url: str) -> str:
    """The prefix in use: ``prefix`` when set, else ``external_url``'s path;
    ``""`` for none, else ``/a/b`` (one leading slash, no trailing one), as
    Alertmanager's ``routePrefix`` after ``strings.TrimSuffix(p, "/")``."""
    path = prefix if prefix else urlsplit(external_url).path
    path = path.strip("/")
    return f"/{path}" if path else ""


class RoutePrefix:
    """ASGI: ``app`` under ``prefix`` (from :func:`route_prefix`, not empty).
    A request under the prefix reaches ``app`` with the prefix as its ASGI
    ``root_path`` (Starlette routes on the path without it; ``request.url``
    keeps the whole path); ``/`` answers 302 to ``<prefix>``, as Alertmanager's;
    anything else 404 as an unknown route does."""

    def __init__(self, app: ASGIApp, prefix: str) -> None:
        self.app, self.prefix = app, prefix

    async def __call__(self, scope: Scope, receive: Callable, send: Callable) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)  # lifespan
            return
        path = scope["path"]
        if path == self.prefix or path.startswith(self.prefix + "/"):
            await self.app({**scope, "root_path": self.prefix}, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1000})
            return
        moved = path == "/"
        headers = [(b"location", self.prefix.encode())] if moved else []
        body = b"" if moved else b"404 page not found\n"
        await send({"type": "http.response.start", "status": 302 if moved else 404,
                    "headers": headers + [(b"content-type", b"text/plain; charset=utf-8"),
                                          (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
