"""``/redoc`` without the internet (README, "The API": ``/docs`` and ``/redoc`` work offline).

``fastapi-offline`` serves Swagger UI's and ReDoc's files from the API, but ReDoc's bundle still
draws its "API docs by Redocly" footer with an image from ``https://cdn.redoc.ly`` (React
component ``fw`` of ``redoc.standalone.js``): a request leaving the machine on every page view,
an error where there is no network. Plait serves ReDoc's page itself, its bundle at
``/redoc/redoc.standalone.js`` with that image's URL replaced by :data:`LOGO` (an empty SVG as a
``data:`` URI: no request, no broken image; the footer's text and link stay). Swagger UI
(``/docs``) is ``fastapi-offline``'s, unchanged.
"""
from __future__ import annotations

import functools
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html
from fastapi.responses import HTMLResponse, Response

#: Where ``fastapi-offline`` mounts its files (its default ``static_url``).
STATIC_URL = "/static-offline-docs"
#: The remote images ReDoc's bundle loads, as written in it.
REMOTE_IMAGES = ("https://cdn.redoc.ly/redoc/logo-mini.svg",)
#: What they become: an empty 1x1 SVG, inline.
LOGO = "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' width='1' height='1'/%3E"
BUNDLE_PATH = "/redoc/redoc.standalone.js"


@functools.cache
def redoc_bundle() -> bytes:
    """``fastapi-offline``'s ``redoc.standalone.js`` with :data:`REMOTE_IMAGES` replaced by
    :data:`LOGO` (read once)."""
    text = (Path(fastapi_offline.__file__).parent / "static" / "redoc.standalone.js").read_text(
        "utf-8")
    for url in REMOTE_IMAGES:
        text = text.replace(url, LOGO)
    return text.encode("utf-8")


def install_redoc(app: FastAPI, path: str = "/redoc") -> None:
    """``GET path``: ReDoc's page on the app's OpenAPI document, loading :func:`redoc_bundle`
    from ``GET`` :data:`BUNDLE_PATH`; both under the route prefix (ASGI ``root_path``). The app
    is a ``FastAPIOffline(redoc_url=None)`` (its favicon, under :data:`STATIC_URL`)."""

    @app.get(path, include_in_schema=False)
    async def redoc_html(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(openapi_url=f"{root}{app.openapi_url}",
                              title=f"{app.title} - ReDoc",
                              redoc_js_url=f"{root}{BUNDLE_PATH}", with_google_fonts=False,
                              redoc_favicon_url=f"{root}{STATIC_URL}/favicon.png")

    @app.get(BUNDLE_PATH, include_in_schema=False)
    async def redoc_js() -> Response:
        return Response(redoc_bundle(), media_type="application/javascript",
                        headers={"Cache-Control": "public, max-age=3600"})
