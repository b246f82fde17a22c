"""Message text: a title and a body rendered from Jinja2 templates (sandboxed).

Every receiver renders one **title** (one line) and one **text** (the body)
per message (docs/alerting.md, "Messages"). Plait's defaults say what fired,
where, since when, how many, what changed since the last message, and link
to the task in the export center, to "silence this group" and to the
runbook. A receiver may replace either with its own template
(``receivers[].templates.title`` / ``.text``); templates run in Jinja2's
:class:`~jinja2.sandbox.SandboxedEnvironment` (no attribute access to
Python internals) and are checked at start-up: a syntax error, an unknown
filter or a failed trial render refuses the configuration with
:class:`~plait.errors.ConfigError` naming the template and the line.

The context (:func:`context`), plain data:

- ``status``: ``"firing"`` when any listed alert fires, else ``"resolved"``;
- ``receiver``, ``external_url``, ``created_at`` (RFC 3339);
- ``counts``: ``{new, escalated, resolved, still_firing}`` summed over groups
  (what changed since the last message of each group);
- ``firing`` / ``resolved``: the listed alerts by status; ``alerts``: all;
- ``groups``: ``[{id, labels, part, parts, reminder, counts, silence_url}]``;
- ``omitted``: alerts not listed because of ``max_alerts``;
- each alert: ``rule``, ``asset``, ``severity``, ``status``, ``change``
  (``new`` | ``escalated`` | ``resolved`` | None), ``labels``, ``annotations``,
  ``summary``, ``description``, ``starts_at`` / ``ends_at`` (RFC 3339),
  ``since`` (``"12m"``: how long it has fired, at the message time),
  ``duration`` (resolved), ``task_url``, ``runbook_url``, ``generator_url``,
  ``fingerprint``, ``group_id``, ``silence_url``.

Links: ``task_url`` = ``<external_url>/ui/tasks/<taskId label>``;
``silence_url`` = ``<external_url>/ui/silences/new?matchers=<group labels as
matchers, URL-encoded>``; ``runbook_url`` = annotation ``runbook_url`` (or
``runbook``). With no external URL the console links are empty.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any
from urllib.parse import quote

from jinja2 import TemplateError, TemplateSyntaxError
from jinja2.sandbox import SandboxedEnvironment

from alerting.intake import format_time
from alerting.model import Message
from plait.errors import ConfigError

#: Default title: ``[FIRING:3] ExportFailed on BILL/daily (+2 new)``.
DEFAULT_TITLE = (
    "[{{ status|upper }}{% if firing %}:{{ firing|length }}{% endif %}] "
    "{{ rules|join(', ') }}{% if assets|length == 1 %} on {{ assets[0] }}"
    "{% elif assets %} on {{ assets|length }} assets{% endif %}"
    "{% if counts.new or counts.escalated or counts.resolved %} ("
    "{% set parts = [] %}"
    "{% if counts.new %}{% set _ = parts.append('+' ~ counts.new ~ ' new') %}{% endif %}"
    "{% if counts.escalated %}{% set _ = parts.append(counts.escalated ~ ' escalated') %}{% endif %}"
    "{% if counts.resolved %}{% set _ = parts.append(counts.resolved ~ ' resolved') %}{% endif %}"
    "{{ parts|join(', ') }})"
    "{% endif %}"
)

#: Default body: what changed, then one line per alert with its links.
DEFAULT_TEXT = """\
{% if counts.new or counts.escalated or counts.resolved -%}
Since the last message: {{ counts.new }} new, {{ counts.escalated }} escalated, {{ counts.resolved }} resolved, {{ counts.still_firing }} still firing.
{% else -%}
Reminder: nothing changed, {{ counts.still_firing }} still firing.
{% endif -%}
{% for a in alerts %}
{{ a.status|upper }} {{ a.severity }} {{ a.rule }}{% if a.asset %} on {{ a.asset }}{% endif %}{% if a.change %} [{{ a.change }}{% if a.escalated_from %} from {{ a.escalated_from }}{% endif %}]{% endif %}

  {% if a.status == "firing" %}since {{ a.starts_at }} ({{ a.since }}){% else %}resolved {{ a.ends_at }} after {{ a.duration }}{% endif %}

{% if a.summary %}  {{ a.summary }}
{% endif %}{% if a.description %}  {{ a.description|truncate(300) }}
{% endif %}{% if a.task_url %}  task: {{ a.task_url }}
{% endif %}{% if a.runbook_url %}  runbook: {{ a.runbook_url }}
{% endif %}{% endfor %}
{%- if omitted %}
... and {{ omitted }} more not listed (max_alerts).
{% endif %}
{%- for g in groups if g.silence_url %}
Silence {{ g.labels_text }}: {{ g.silence_url }}
{%- endfor %}
"""

_ENV = SandboxedEnvironment(autoescape=False, keep_trailing_newline=False)


def human_duration(seconds: float | None) -> str:
    """``"45s"``, ``"12m"``, ``"3h05m"``, ``"2d04h"`` (floor)."""
    if seconds is None:
        return ""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600:02d}h"


_ENV.filters["duration"] = human_duration


def _matchers(labels: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def silence_url(external_url: str, group_labels: dict[str, str]) -> str:
    """Console link that opens a new silence for these group labels ('' without a URL)."""
    if not external_url:
        return ""
    return f"{external_url}/ui/silences/new?matchers={quote(_matchers(group_labels), safe='')}"


def task_url(external_url: str, labels: dict[str, str]) -> str:
    """``<external_url>/ui/tasks/<taskId>`` for an alert carrying ``taskId`` ('' otherwise)."""
    tid = labels.get("taskId")
    return f"{external_url}/ui/tasks/{quote(tid, safe='')}" if external_url and tid else ""


def context(message: Message, external_url: str = "", max_alerts: int = 0,
            send_resolved: bool = True) -> dict[str, Any]:
    """The template context of ``message`` (see the module doc).

    ``max_alerts`` (0 = all) lists at most that many alerts, firing first;
    ``send_resolved`` False leaves resolved alerts out."""
    now = message.created_at
    alerts, groups = [], []
    counts = {"new": 0, "escalated": 0, "resolved": 0, "still_firing": 0}
    for s in message.sections:
        surl = silence_url(external_url, s["group_labels"])
        groups.append({"id": s["group_id"], "labels": dict(s["group_labels"]),
                       "labels_text": ", ".join(f"{k}={v}" for k, v in s["group_labels"].items()),
                       "part": s["part"], "parts": s["parts"], "reminder": s["reminder"],
                       "counts": dict(s["counts"]), "silence_url": surl})
        for k in counts:
            counts[k] += s["counts"].get(k, 0)
        for v in s["alerts"]:
            if v["status"] == "resolved" and not send_resolved:
                continue
            ann = v["annotations"]
            alerts.append({
                "rule": v["rule"], "asset": v["asset"], "severity": v["severity"],
                "status": v["status"], "change": v["change"],
                "escalated_from": v.get("escalated_from"),
                "labels": dict(v["labels"]), "annotations": dict(ann),
                "summary": ann.get("summary", ""), "description": ann.get("description", ""),
                "starts_at": format_time(v["starts_at"]),
                "ends_at": format_time(v["ends_at"]) if v["ends_at"] else "",
                "since": human_duration(now - v["starts_at"]),
                "duration": human_duration(v["duration"]),
                "task_url": task_url(external_url, v["labels"]),
                "runbook_url": ann.get("runbook_url") or ann.get("runbook", ""),
                "generator_url": v.get("generator_url", ""), "fingerprint": v["fingerprint"],
                "group_id": s["group_id"], "silence_url": surl,
            })
    alerts.sort(key=lambda a: a["status"] != "firing")  # stable: firing first
    omitted = 0
    if max_alerts and len(alerts) > max_alerts:
        omitted = len(alerts) - max_alerts
        alerts = alerts[:max_alerts]
    firing = [a for a in alerts if a["status"] == "firing"]
    any_firing = any(v["status"] == "firing" for s in message.sections for v in s["alerts"])
    return {
        "status": "firing" if any_firing else "resolved",
        "receiver": message.receiver, "external_url": external_url,
        "created_at": format_time(message.created_at), "counts": counts,
        "alerts": alerts, "firing": firing,
        "resolved": [a for a in alerts if a["status"] == "resolved"],
        "groups": groups, "omitted": omitted,
        "rules": sorted({a["rule"] for a in alerts}),
        "assets": sorted({a["asset"] for a in alerts if a["asset"]}),
        "message_id": message.id,
    }


@lru_cache(maxsize=256)
def _compiled(source: str):
    return _ENV.from_string(source)


def _compile(source: str, name: str):
    try:
        return _ENV.from_string(source)
    except TemplateSyntaxError as e:
        raise ConfigError(f"{name}: template error at line {e.lineno}: {e.message}") from None


def _sample() -> Message:
    view = {"fingerprint": "0" * 16, "rule": "ExportFailed", "asset": "BILL/daily",
            "severity": "critical", "status": "firing", "change": "new", "escalated_from": None,
            "labels": {"taskId": "t1"}, "annotations": {"summary": "s"}, "starts_at": 0.0,
            "ends_at": None, "duration": None, "transient": False, "generator_url": "",
            "source": "native"}
    section = {"group_id": "g", "group_labels": {"rule": "ExportFailed"}, "part": 1, "parts": 1,
               "merged": False, "reminder": False,
               "counts": {"new": 1, "escalated": 0, "resolved": 0, "still_firing": 1},
               "alerts": [view]}
    return Message("m", "r", "k", 1, 60.0, [section], alert_count=1)


def check_templates(receiver: Any, key: str) -> None:
    """Start-up check of a receiver's ``templates`` (``key`` is its config
    path, ``receivers.0.templates``): compiles each and renders it once on a
    sample message.

    Raises:
        ConfigError: ``receivers.0.templates.text: template error at line 3: ...``.
    """
    sample = context(_sample(), "https://plait.example")
    for field in ("title", "text"):
        source = getattr(receiver.templates, field)
        if not source:
            continue
        name = f"{key}.{field} (receiver {receiver.name!r})"
        tpl = _compile(source, name)
        try:
            tpl.render(sample)
        except TemplateError as e:
            line = _error_line(e)
            raise ConfigError(f"{name}: template error at line {line}: {e}") from None
        except Exception as e:  # noqa: BLE001 - 1/0 and friends inside a template
            raise ConfigError(f"{name}: template error at line {_error_line(e)}: "
                              f"{type(e).__name__}: {e}") from None


def _error_line(e: BaseException) -> int | str:
    """The template line of a render error, from the traceback (Jinja2 maps
    frames to ``<template>`` lines)."""
    tb, line = e.__traceback__, "?"
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def render(message: Message, receiver: Any, external_url: str = "") -> tuple[str, str, dict]:
    """(title, text, context) of ``message`` for ``receiver`` (its
    templates, ``max_alerts``, ``send_resolved``). A template that fails at
    run time (it passed the start-up check) falls back to the default, so a
    message is never lost to a template."""
    ctx = context(message, external_url, receiver.max_alerts, receiver.send_resolved)
    out = []
    for field, default in (("title", DEFAULT_TITLE), ("text", DEFAULT_TEXT)):
        source = getattr(receiver.templates, field) or default
        try:
            text = _compiled(source).render(ctx)
        except Exception:  # noqa: BLE001
            text = _compiled(default).render(ctx)
        out.append(text.strip() if field == "title" else text.strip() + "\n")
    title = " ".join(out[0].split())[:250]
    return title, out[1], ctx
