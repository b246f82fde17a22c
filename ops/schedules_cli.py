"""``plait schedules ...``: the schedule routes from the command line
(``producers.schedules.ScheduleClient``). API: ``--api``, else
``PLAIT_API_URL``, else the running ``plait dev``; signed when
``PLAIT_APP_KEY`` and ``PLAIT_APP_SECRET`` are set, else with ``PLAIT_ALERTMANAGER_TOKEN`` as
bearer when set. Prints JSON."""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

ACTIONS = ("list", "get", "create", "pause", "resume", "delete", "trigger", "backfill")


def add_parser(sub) -> None:
    """Register ``plait schedules`` on the CLI's subparsers."""
    p = sub.add_parser("schedules", help="manage schedules: list, get ID, create FILE|-, "
                                         "pause ID [--note], resume ID, delete ID, "
                                         "trigger ID, backfill ID START END")
    p.add_argument("action", choices=ACTIONS)
    p.add_argument("args", nargs="*", help="schedule id, file, or START END (RFC 3339)")
    p.add_argument("--note", default=None, help="pause note")
    p.add_argument("--sys-code", default=None, help="open mode: whose schedules")
    p.add_argument("--api", default=None,
                   help="API base URL (default: PLAIT_API_URL, else the running `plait dev`)")
    p.set_defaults(fn=cmd_schedules)


def cmd_schedules(args: argparse.Namespace) -> None:
    """Run one ``plait schedules`` action; exits non-zero with the API's
    message (and the fields it names) when refused."""
    import sys

    from ops.cli_shared import CliError, api_url
    from producers.schedules import ScheduleClient, ScheduleError

    need = {"list": 0, "create": 1, "backfill": 3}.get(args.action, 1)
    if len(args.args) != need:
        raise CliError(f"`plait schedules {args.action}` takes {need} argument(s)")
    client = ScheduleClient(api_url(args.api), os.environ.get("PLAIT_APP_KEY"),
                            os.environ.get("PLAIT_APP_SECRET"), args.sys_code,
                            token=os.environ.get("PLAIT_ALERTMANAGER_TOKEN"))
    a = args.args
    try:
        if args.action == "list":
            out = client.list()
        elif args.action == "create":
            text = sys.stdin.read() if a[0] == "-" else Path(a[0]).read_text()
            out = client.create(json.loads(text))
        elif args.action == "pause":
            out = client.pause(a[0], args.note)
        elif args.action == "backfill":
            out = client.backfill(*a)
        else:
            out = getattr(client, args.action)(a[0])
    except ScheduleError as exc:
        errors = (exc.body.get("data") or {}).get("errors") if isinstance(exc.body, dict) else None
        detail = "; ".join(f"{e['field']}: {e['rule']}" for e in errors or [])
        raise CliError(f"{exc}" + (f" ({detail})" if detail else "")) from None
    finally:
        client.close()
    print(json.dumps(out, indent=2))
