"""Message text: a title line and a body per message from sandboxed Jinja2 templates (defaults or
the receiver's; docs/alerting.md, "Messages"), checked at start-up (:func:`check_templates`); one
failing at run time falls back to the default."""
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

#: Default body: what changed, then one block per kind of alert (:func:`kinds`).
DEFAULT_TEXT = """\
{% if counts.new or counts.escalated or counts.resolved %}
Since the last message: {{ changes|join(', ') }}. Firing now: {{ counts.still_firing }}.
{% else %}
Reminder: nothing changed since the last message. Firing now: {{ counts.still_firing }}.
{% endif %}
{% if merged_groups %}
{{ merged_groups }} group{{ "s" if merged_groups != 1 }} ({{ merged_alerts }} alert{{ "s" if merged_alerts != 1 }}) waited for the rate limit and {{ "are" if merged_groups != 1 else "is" }} merged here.
{% endif %}
{% for k in kinds %}

{{ k.status|upper }} {{ k.rule }} ({{ k.severity }}) - {{ k.count }} alert{{ "s" if k.count != 1 }}{% if k.change %}, {{ k.change }}{% if k.escalated_from %} from {{ k.escalated_from }}{% endif %}{% endif %}

{% if k.summary %}
  {{ k.summary }}
{% endif %}
{% if k.where %}
  where: {{ k.where }}
{% endif %}
{% if k.status == "firing" %}
  since: {{ k.starts_at }} ({{ k.since }} ago)
{% else %}
  resolved: {{ k.ends_at }} (fired for {{ k.duration }})
{% endif %}
{% if k.description %}
  detail: {{ k.description|truncate(300) }}
{% endif %}
{% for u in k.task_urls %}
  task: {{ u }}
{% endfor %}
{% if k.runbook_url %}
  runbook: {{ k.runbook_url }}
{% endif %}
{% if k.silence_url %}
  silence: {{ k.silence_url }}
{% endif %}
{% endfor %}
{% if omitted %}

{{ omitted }} more alert{{ "s" if omitted != 1 }} not listed (max_alerts).
{% endif %}
"""

_ENV = SandboxedEnvironment(autoescape=False, trim_blocks=True, lstrip_blocks=True)


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
    """The template context of ``message``: at most ``max_alerts`` alerts (0 = all), firing first;
    none resolved with ``send_resolved`` false."""
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
                "_starts": v["starts_at"], "_ends": v["ends_at"], "_dur": v["duration"],
            })
    alerts.sort(key=lambda a: a["status"] != "firing")  # stable: firing first
    omitted = 0
    if max_alerts and len(alerts) > max_alerts:
        omitted = len(alerts) - max_alerts
        alerts = alerts[:max_alerts]
    firing = [a for a in alerts if a["status"] == "firing"]
    changes = [f"{counts[k]} {k}" for k in ("new", "escalated", "resolved") if counts[k]]
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
        "message_id": message.id, "changes": changes,
        "merged_groups": message.merged_groups, "merged_alerts": message.merged_alerts,
        "kinds": kinds(alerts, external_url, now),
    }


#: most assets named on a kind's ``where`` line, and task links listed
WHERE_MAX, TASKS_MAX = 10, 3


def kinds(alerts: list[dict[str, Any]], external_url: str, now: float) -> list[dict[str, Any]]:
    """Alerts folded by (status, rule, severity, change), first-seen order: ``count``, ``where``
    (``"n001, n002, ... and 40 more"``), earliest ``starts_at`` / ``since``, latest ``ends_at`` /
    longest ``duration``, the first alert's ``summary`` / ``description``, ``task_urls`` (<= 3),
    ``runbook_url``, ``silence_url``."""
    out: dict[tuple, dict[str, Any]] = {}
    for a in alerts:
        key = (a["status"], a["rule"], a["severity"], a["change"], a["escalated_from"])
        k = out.get(key)
        if k is None:
            k = out[key] = {"status": a["status"], "rule": a["rule"], "severity": a["severity"],
                            "change": a["change"], "escalated_from": a["escalated_from"],
                            "count": 0, "assets": [], "summary": a["summary"],
                            "description": a["description"], "runbook_url": a["runbook_url"],
                            "task_urls": [], "groups": set(), "silence_url": a["silence_url"],
                            "_starts": a["_starts"], "_ends": a["_ends"], "_dur": a["_dur"]}
        k["count"] += 1
        if a["asset"]:
            k["assets"].append(a["asset"])
        if a["task_url"] and len(k["task_urls"]) < TASKS_MAX and a["task_url"] not in k["task_urls"]:
            k["task_urls"].append(a["task_url"])
        k["groups"].add(a["group_id"])
        k["_starts"] = min(k["_starts"], a["_starts"])
        if a["_ends"] is not None:
            k["_ends"] = max(k["_ends"] or 0, a["_ends"])
        if a["_dur"] is not None:
            k["_dur"] = max(k["_dur"] or 0, a["_dur"])
        if a["summary"] != k["summary"]:
            k["_other_summaries"] = k.get("_other_summaries", 0) + 1
    result = []
    for k in out.values():
        names = k.pop("assets")
        shown = ", ".join(names[:WHERE_MAX])
        k["where"] = shown + (f" and {len(names) - WHERE_MAX} more" if len(names) > WHERE_MAX else "")
        if len(k.pop("groups")) > 1:
            k["silence_url"] = silence_url(external_url, {"rule": k["rule"]})
        others = k.pop("_other_summaries", 0)
        if others and k["summary"]:
            k["summary"] += f" (and {others} other summar{'y' if others == 1 else 'ies'})"
        starts, ends, dur = k.pop("_starts"), k.pop("_ends"), k.pop("_dur")
        k["starts_at"], k["since"] = format_time(starts), human_duration(now - starts)
        k["ends_at"] = format_time(ends) if ends is not None else ""
        k["duration"] = human_duration(dur)
        result.append(k)
    return result


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
    """Compile a receiver's ``templates`` (config path ``key``) and render each on a sample message.
    Raises ConfigError (``receivers.0.templates.text: template error at line 3: ...``)."""
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
    """The template line of a render error, from the traceback (Jinja2 maps frames to
    ``<template>`` lines)."""
    tb, line = e.__traceback__, "?"
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def render(message: Message, receiver: Any, external_url: str = "") -> tuple[str, str, dict]:
    """(title, text, context) of ``message`` for ``receiver``; a template failing at run time falls
    back to the default."""
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
