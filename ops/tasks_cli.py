"""``plait tasks list|show ID|cancel ID|download ID``: export tasks from the
command line, over the API (``--api``, else ``PLAIT_API_URL``, else the
running ``plait dev``; signed when ``PLAIT_APP_KEY`` and
``PLAIT_APP_SECRET`` are set, else with ``PLAIT_ALERTMANAGER_TOKEN`` as bearer
when set).

``list`` prints one line per task (newest first: id, status, created,
bizType, rows, downloads, file name) and, when more remain, the command for
the next page; ``--json`` prints the API's ``data`` instead. ``show`` and
``cancel`` print the API's JSON. ``download`` saves the file of a SUCCESS
task (``--out``, default its file name) and checks its sha256.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
from pathlib import Path
from typing import Any

ACTIONS = ("list", "show", "cancel", "download")
#: ``plait tasks list`` option -> API query parameter.
FILTERS = {"sys_code": "sysCode", "user_id": "userId", "status": "status",
           "biz_type": "bizType", "created_from": "createdFrom", "created_to": "createdTo",
           "limit": "limit", "cursor": "cursor"}


def add_parser(sub) -> None:
    """Register ``plait tasks`` on the CLI's subparsers."""
    p = sub.add_parser("tasks", help="export tasks: list, show ID, cancel ID, download ID")
    p.add_argument("action", choices=ACTIONS)
    p.add_argument("task_id", nargs="?", help="the task (show, cancel, download)")
    p.add_argument("--sys-code", help="open mode: whose tasks (default: PLAIT_SYS_CODE)")
    p.add_argument("--user-id", help="one end user's tasks (required when signed)")
    p.add_argument("--status", help="list: only these statuses, comma-separated")
    p.add_argument("--biz-type", help="list: only this bizType")
    p.add_argument("--from", dest="created_from", help="list: created at or after (RFC 3339)")
    p.add_argument("--to", dest="created_to", help="list: created at or before (RFC 3339)")
    p.add_argument("--limit", type=int, help="list: tasks per page (API default 100)")
    p.add_argument("--cursor", help="list: the page after this one (printed by list)")
    p.add_argument("--json", action="store_true", help="list: print the API's JSON")
    p.add_argument("--out", help="download: where to save (default: the file's name)")
    p.add_argument("--api", default=None,
                   help="API base URL (default: PLAIT_API_URL, else the running `plait dev`)")
    p.set_defaults(fn=cmd_tasks)


def cmd_tasks(args: argparse.Namespace) -> None:
    """Run one ``plait tasks`` action; a refusal is one line with the API's
    message and the fields it names."""
    import httpx

    from ops.cli_shared import START_DEV, CliError, api_url
    from producers.signing import api_auth

    if (args.task_id is None) != (args.action == "list"):
        raise CliError(f"`plait tasks {args.action}` takes "
                       + ("no task id" if args.action == "list" else "a task id"))
    auth = api_auth(os.environ.get("PLAIT_APP_KEY"), os.environ.get("PLAIT_APP_SECRET"),
                    os.environ.get("PLAIT_ALERTMANAGER_TOKEN"))
    api = api_url(args.api)
    with httpx.Client(base_url=api, auth=auth, timeout=30) as http:
        try:
            ACTION[args.action](http, args)
        except httpx.HTTPError as exc:
            raise CliError(f"cannot reach the API at {api} ({type(exc).__name__}); "
                           f"{START_DEV}, or pass --api URL") from None


def call(http, method: str, path: str, params: dict[str, Any] | None = None,
         body: Any = None) -> Any:
    """The envelope's ``data`` of one API call (``body``: sent as JSON);
    CliError with the message (and the fields named) on a 4xx/5xx."""
    from ops.cli_shared import CliError

    resp = http.request(method, path, params=params, json=body)
    try:
        body = resp.json()
    except ValueError:
        body = {"message": resp.text[:200]}
    if resp.status_code >= 400:
        errors = (body.get("data") or {}).get("errors") if isinstance(body, dict) else None
        detail = "; ".join(f"{e['field']}: {e['rule']}" for e in errors or [])
        raise CliError(f"HTTP {resp.status_code}: {body.get('message')}"
                       + (f" ({detail})" if detail else ""))
    return body.get("data")


def _params(args: argparse.Namespace) -> dict[str, Any]:
    values = {api: getattr(args, opt) for opt, api in FILTERS.items()}
    if values["sysCode"] is None:
        values["sysCode"] = os.environ.get("PLAIT_SYS_CODE")
    return {k: v for k, v in values.items() if v is not None}


def _list(http, args: argparse.Namespace) -> None:
    params = _params(args)
    data = call(http, "GET", "/export/tasks", params)
    if args.json:
        print(json.dumps(data, indent=2))
        return
    for t in data["tasks"]:
        rows = (t.get("file") or {}).get("rows", t.get("exportedRows", ""))
        print(f"{t['taskId']}  {t['status']:<9}  {t.get('createdAt', '')}  "
              f"{t.get('bizType', '')}  rows={rows}  downloads={t['downloads']['count']}  "
              f"{t.get('fileName', '')}")
    if data["nextCursor"]:
        print(f"# more: plait tasks list ... --cursor {data['nextCursor']}")


def _show(http, args: argparse.Namespace) -> None:
    print(json.dumps(call(http, "GET", f"/export/tasks/{args.task_id}", _user(args)), indent=2))


def _cancel(http, args: argparse.Namespace) -> None:
    data = call(http, "POST", f"/export/tasks/{args.task_id}/cancel", _user(args))
    print(json.dumps(data, indent=2))


def _user(args: argparse.Namespace) -> dict[str, str]:
    return {"userId": args.user_id} if args.user_id else {}


def _download(http, args: argparse.Namespace) -> None:
    from ops.cli_shared import CliError

    task = call(http, "GET", f"/export/tasks/{args.task_id}", _user(args))
    info = task.get("file")
    if task["status"] != "SUCCESS" or not info:
        raise CliError(f"task {args.task_id} is {task['status']}: no file to download")
    out = Path(args.out or info["fileName"])
    digest = hashlib.sha256()
    with http.stream("GET", info["url"]) as resp:
        if resp.status_code != 200:
            raise CliError(f"the download link answered HTTP {resp.status_code}")
        with open(out, "wb") as fh:
            for block in resp.iter_bytes(1 << 20):
                digest.update(block)
                fh.write(block)
    if digest.hexdigest() != info["sha256"]:
        out.unlink()
        raise CliError(f"{out}: sha256 differs from the task's; the file was removed")
    print(f"{out} ({info['bytes']} bytes, {info['rows']} rows, sha256 ok)")


ACTION = {"list": _list, "show": _show, "cancel": _cancel, "download": _download}
