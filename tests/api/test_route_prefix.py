"""The route prefix (``api/prefix.py``), Alertmanager's ``--web.route-prefix``:
which prefix is in use, and an app served under it only. End to end with the
real amtool: tests/alerting_e2e/test_am_acceptance_e2e.py test_web_with_prefix."""
from __future__ import annotations

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

from api.prefix import RoutePrefix, route_prefix


@pytest.mark.parametrize("prefix,external,want", [
    ("/foo", "", "/foo"), ("foo/", "", "/foo"), ("/", "http://h/bar", ""),
    ("", "http://h/bar/", "/bar"), ("", "http://h:9093", ""), ("", "", ""),
    ("/a/b", "http://h/bar", "/a/b"),
])
def test_the_prefix_is_the_setting_else_the_external_urls_path(prefix, external, want):
    """cmd/alertmanager/main.go: ``--web.route-prefix`` defaults to the path
    of ``--web.external-url``; ``/`` is none; no trailing slash."""
    assert route_prefix(prefix, external) == want


def test_an_app_answers_under_the_prefix_only():
    app = FastAPI()

    @app.get("/api/v2/status")
    async def status(request: Request):
        return {"path": request.url.path, "root": request.scope["root_path"]}

    c = TestClient(RoutePrefix(app, "/foo"))
    assert c.get("/foo/api/v2/status").json() == {"path": "/foo/api/v2/status", "root": "/foo"}
    assert c.get("/api/v2/status").status_code == 404
    assert c.get("/foobar/api/v2/status").status_code == 404
    assert c.get("/foo/api/v2/nothing").status_code == 404
    root = c.get("/", follow_redirects=False)
    assert (root.status_code, root.headers["location"]) == (302, "/foo")
