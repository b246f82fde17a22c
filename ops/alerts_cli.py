"""``plait alerts why|list`` and ``plait silences list|add|expire``: the alert
funnel from the command line, over the API (``--api``, else ``PLAIT_API_URL``,
else the running ``plait dev``'s ``.plait/dev.env``). Credentials, when the API
wants them: ``PLAIT_ALERTMANAGER_TOKEN`` (sent as ``Authorization: Bearer``),
else ``PLAIT_APP_KEY`` / ``PLAIT_APP_SECRET`` (a signed request).

``alerts why FINGERPRINT|LABELS`` prints an alert's story (``GET
/alerts/{fingerprint}/history``), one fact a line, oldest first; LABELS
(``alertname=X,instance=Y``) are hashed into the fingerprint the API gives an
Alertmanager-form alert with exactly those labels
(:func:`alerting.dedupe.labelset_fingerprint`); a native alert is named by the
fingerprint ``alerts list`` shows (its identity). ``alerts list`` prints the
current alerts (``GET /api/v2/alerts``); ``silences list|add|expire`` the
native ``/silences`` routes. ``--json`` prints the API's JSON instead.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import time
from typing import Any

#: 16 lower-case hex digits: an alert fingerprint as the API prints it.
_FINGERPRINT = re.compile(r"[0-9a-f]{16}")


def add_parsers(sub) -> None:
    """Register ``plait alerts`` and ``plait silences`` on the CLI's subparsers."""
    api_help = "API base URL (default: PLAIT_API_URL, else the running `plait dev`)"
    p = sub.add_parser("alerts", help="alerts: why FINGERPRINT|LABELS (its story), list")
    p.add_argument("action", choices=("why", "list"))
    p.add_argument("alert", nargs="?",
                   help="why: a fingerprint, or labels like alertname=X,instance=Y")
    p.add_argument("--json", action="store_true", help="print the API's JSON")
    p.add_argument("--api", default=None, help=api_help)
    p.set_defaults(fn=cmd_alerts)
    p = sub.add_parser("silences", help="silences: list, add MATCHER..., expire ID")
    p.add_argument("action", choices=("list", "add", "expire"))
    p.add_argument("args", nargs="*", help='add: matchers (alertname="X"); expire: the silence id')
    p.add_argument("--duration", default="1h", help="add: how long from now (30m, 2h; default 1h)")
    p.add_argument("--comment", help="add: why (required)")
    p.add_argument("--created-by", default=os.environ.get("USER", "plait"),
                   help="add: who (default: $USER)")
    p.add_argument("--allow-broad", action="store_true",
                   help="add: allow matchers that match (almost) everything")
    p.add_argument("--json", action="store_true", help="print the API's JSON")
    p.add_argument("--api", default=None, help=api_help)
    p.set_defaults(fn=cmd_silences)


def fingerprint_of(text: str) -> str:
    """The fingerprint ``text`` names: itself when 16 hex digits, else the
    Alertmanager fingerprint of the label set ``name=value,name=value``.

    Raises ``CliError`` naming the part that is not ``name=value``."""
    from alerting.dedupe import labelset_fingerprint
    from ops.cli_shared import CliError

    if _FINGERPRINT.fullmatch(text):
        return text
    labels: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, eq, value = part.partition("=")
        if not eq or not name.strip():
            raise CliError(f"{part!r}: expected a fingerprint (16 hex digits) or labels "
                           "name=value,name=value")
        labels[name.strip()] = value.strip().strip('"')
    if not labels:
        raise CliError("give a fingerprint (16 hex digits) or labels name=value,name=value")
    return labelset_fingerprint(labels)


def _client(args: argparse.Namespace):
    import httpx

    from producers.signing import PlaitAuth

    token = os.environ.get("PLAIT_ALERTMANAGER_TOKEN")
    key, secret = os.environ.get("PLAIT_APP_KEY"), os.environ.get("PLAIT_APP_SECRET")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    auth = PlaitAuth(key, secret) if key and secret and not token else None
    return httpx.Client(base_url=args.api_url, headers=headers, auth=auth, timeout=30)


def _run(args: argparse.Namespace, action) -> None:
    """Run ``action(http, args)`` with a client of the API; an unreachable API
    is one line saying how to start or name one."""
    import httpx

    from ops.cli_shared import START_DEV, CliError, api_url

    args.api_url = api_url(args.api)
    with _client(args) as http:
        try:
            action(http, args)
        except httpx.HTTPError as exc:
            raise CliError(f"cannot reach the API at {args.api_url} ({type(exc).__name__}); "
                           f"{START_DEV}, or pass --api URL") from None


def cmd_alerts(args: argparse.Namespace) -> None:
    """Run one ``plait alerts`` action."""
    from ops.cli_shared import CliError

    if (args.alert is None) != (args.action == "list"):
        raise CliError("`plait alerts why` takes a fingerprint or labels" if args.action == "why"
                       else "`plait alerts list` takes no argument")
    _run(args, _why if args.action == "why" else _list_alerts)


def cmd_silences(args: argparse.Namespace) -> None:
    """Run one ``plait silences`` action."""
    from ops.cli_shared import CliError

    wanted = {"list": "no argument", "add": "matchers", "expire": "one silence id"}[args.action]
    if (args.action == "list" and args.args) or (args.action == "add" and not args.args) or (
            args.action == "expire" and len(args.args) != 1):
        raise CliError(f"`plait silences {args.action}` takes {wanted}")
    if args.action == "add" and not args.comment:
        raise CliError("`plait silences add` needs --comment (why the silence exists)")
    _run(args, {"list": _list_silences, "add": _add_silence, "expire": _expire}[args.action])


def _show(data: Any) -> None:
    print(json.dumps(data, indent=2))


def story_lines(entries: list[dict[str, Any]]) -> list[str]:
    """One readable line per history entry (shapes: :mod:`alerting.history`)."""
    out = []
    for e in entries:
        kind, at = e.get("kind"), e.get("time", "")
        if kind == "outcome":
            detail = {"delivered": f"in message {e.get('messageId')}",
                      "merged": f"into message {e.get('messageId')}",
                      "deduplicated": f"({e.get('reason') or 'repeat'})",
                      "silenced": f"by silence {e.get('silenceId')}",
                      "inhibited": "by " + ", ".join(e.get("inhibitedBy") or []),
                      "rejected": e.get("reason", "")}.get(e.get("outcome"), "")
            out.append(f"{at}  {e.get('outcome')} {detail}  (raw alert {e.get('rawId')})")
        elif kind == "message":
            part = f", part {e['part']} of {e['parts']}" if e.get("parts", 1) > 1 else ""
            out.append(f"{at}  listed {e.get('status')} in message {e.get('messageId')} to "
                       f"{e.get('receiver')} (attempt {e.get('attempt')}{part})")
        elif kind == "attempt":
            answer = f"HTTP {e['httpStatus']}" if e.get("httpStatus") else "no answer"
            error = f": {e['error']}" if e.get("error") and not e.get("ok") else ""
            out.append(f"{at}  {'delivered' if e.get('ok') else 'failed'} to {e.get('receiver')} "
                       f"({answer}{error}, message {e.get('messageId')}, attempt "
                       f"{e.get('attempt')}, {e.get('elapsedSeconds')} s)")
        else:
            out.append(f"{at}  {json.dumps(e)}")
    return out


def _why(http, args: argparse.Namespace) -> None:
    from ops.tasks_cli import call

    fp = fingerprint_of(args.alert)
    data = call(http, "GET", f"/alerts/{fp}/history")
    if args.json:
        _show(data)
        return
    print(f"alert {data.get('fingerprint') or fp}")
    for line in story_lines(data["entries"]):
        print(f"  {line}")


def _list_alerts(http, args: argparse.Namespace) -> None:
    from ops.cli_shared import CliError

    resp = http.get("/api/v2/alerts")
    if resp.status_code >= 400:
        raise CliError(f"HTTP {resp.status_code}: {resp.text[:200]}")
    alerts = resp.json()
    if args.json:
        _show(alerts)
        return
    for a in alerts:
        labels = ",".join(f"{k}={v}" for k, v in sorted(a.get("labels", {}).items()))
        state = (a.get("status") or {}).get("state", "")
        print(f"{a.get('fingerprint')}  {state:<11}  {a.get('startsAt', '')}  {labels}")


def _list_silences(http, args: argparse.Namespace) -> None:
    from ops.tasks_cli import call

    data = call(http, "GET", "/silences")
    if args.json:
        _show(data)
        return
    for s in data["silences"]:
        print(f"{s['id']}  {s['status']:<8}  until {s['endsAt']}  silenced={s['silenced']}  "
              f"{' '.join(s['matchers'])}  # {s['comment']} ({s['createdBy']})")


def _add_silence(http, args: argparse.Namespace) -> None:
    from alerting.config import parse_duration
    from alerting.intake import format_time
    from ops.cli_shared import CliError
    from ops.tasks_cli import call

    try:
        seconds = parse_duration(args.duration)
    except ValueError as exc:
        raise CliError(f"--duration: {exc}") from None
    body = {"matchers": args.args, "endsAt": format_time(time.time() + seconds),
            "createdBy": args.created_by, "comment": args.comment, "allowBroad": args.allow_broad}
    data = call(http, "POST", "/silences", body=body)
    if args.json:
        _show(data)
    else:
        print(data["silenceId"])


def _expire(http, args: argparse.Namespace) -> None:
    from ops.tasks_cli import call

    data = call(http, "DELETE", f"/silences/{args.args[0]}")
    if args.json:
        _show(data)
    else:
        print(f"{data['silence']['id']} {data['silence']['status']}")

