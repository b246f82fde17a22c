"""Alertmanager's API v2 (paths, bodies, status codes of its
``api/v2/openapi.yaml``), so Prometheus, amtool and Grafana use Plait
unchanged. Errors on these paths are Alertmanager's JSON strings
(``api.envelope``). Alerts come from the funnel's read model plus this
process's recent posts; silences and inhibitions are applied at query time,
as Alertmanager does."""
from __future__ import annotations

import asyncio
import functools
import time
import uuid
from datetime import datetime, timezone
from typing import Any, Callable, Literal

import yaml
from fastapi import APIRouter, Body, Depends, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field, StrictBool, field_validator

from alerting.delivery import am_compare, am_group_labels, labels_before
from alerting.intake import (OUT_OF_RANGE, format_time, in_range,
                             from_alertmanager_alert)
from alerting.model import AlertRejected
from alerting.matchers import MatchOp, Matcher, compile_regex, parse_matcher, regex_hit
from alerting.receivers.registry import receiver_type
from alerting.silence import SilenceRefused
from alerting.silence_store import SilenceStore, silence_state
from alerting.view import inhibited_now, read_views
from api.alerting_deps import (AM_ROUTER, REFUSED, Alerting, bearer, get_alerting, get_ingest,
                               read_body, silence_store)
from api.alerting_edge import public_field, public_text, scrub_text
from api.ingest import AlertIngest
from plait import keys as K
from plait.callers import Caller
from plait.errors import ConfigError, FieldError, Forbidden, NotFound, RequestInvalid
from plait.logs import get_logger

log = get_logger("plait.api")

#: ``endsAt`` shown for a recurring native silence without an end.
FAR_FUTURE = "9999-12-31T23:59:59Z"
MAX_ALERTS = 10_000
MATCHER_FORMS = ('name="value" with =, !=, =~ or !~ (Alertmanager 0.25-0.34 syntax; a name with '
                 'spaces or {}!=~,"\' in double quotes: "a b"="x")')
_STARTED = time.time()


class Receiver(BaseModel):
    """``receiver``."""
    name: str


class AlertStatus(BaseModel):
    """``alertStatus``: ``suppressed`` when silenced or inhibited."""
    state: Literal["unprocessed", "active", "suppressed"]
    silencedBy: list[str]
    inhibitedBy: list[str]


class GettableAlert(BaseModel):
    """``gettableAlert``."""
    labels: dict[str, str]
    annotations: dict[str, str]
    receivers: list[Receiver]
    fingerprint: str = Field(description="the alert's identity (16 hex): Alertmanager's "
                             "fingerprint of the label set; a native alert's of "
                             "dedupe.fingerprint_labels, as its messages and history name it")
    startsAt: datetime
    updatedAt: datetime
    endsAt: datetime
    generatorURL: str | None = None
    status: AlertStatus


class PostableAlert(BaseModel):
    """``postableAlert`` (what Prometheus sends)."""
    labels: dict[str, str]
    annotations: dict[str, str] | None = None
    startsAt: datetime | None = None
    endsAt: datetime | None = None
    generatorURL: str | None = None


class AlertGroup(BaseModel):
    """``alertGroup``."""
    labels: dict[str, str]
    receiver: Receiver
    alerts: list[GettableAlert]


class AMMatcher(BaseModel):
    """``matcher``: ``isRegex`` / ``isEqual`` pick ``=``, ``!=``, ``=~``, ``!~``."""
    name: str
    value: str
    isRegex: StrictBool  # as Alertmanager, "yes" or 1 are refused
    isEqual: StrictBool = True

    @field_validator("isEqual", mode="before")
    @classmethod
    def _null_is_default(cls, v: Any) -> Any:
        """``null`` is true, as Alertmanager's ``*bool`` default reads it."""
        return True if v is None else v


class PostableSilence(BaseModel):
    """``postableSilence``; ``id`` updates that silence."""
    id: str | None = None
    matchers: list[AMMatcher] = Field(min_length=1)
    startsAt: datetime
    endsAt: datetime
    createdBy: str
    comment: str


class SilenceStatus(BaseModel):
    """``silenceStatus``."""
    state: Literal["expired", "active", "pending"]


class GettableSilence(BaseModel):
    """``gettableSilence``."""
    id: str
    status: SilenceStatus
    updatedAt: datetime
    matchers: list[AMMatcher]
    startsAt: datetime
    endsAt: datetime
    createdBy: str
    comment: str


class SilenceCreated(BaseModel):
    """The ``postSilences`` answer."""
    silenceID: str


class PeerStatus(BaseModel):
    name: str
    address: str


class ClusterStatus(BaseModel):
    name: str | None = None
    status: Literal["ready", "settling", "disabled"]
    peers: list[PeerStatus] = []


class VersionInfo(BaseModel):
    version: str
    revision: str
    branch: str
    buildUser: str
    buildDate: str
    goVersion: str


class AlertmanagerConfig(BaseModel):
    original: str


class AlertmanagerStatus(BaseModel):
    """``alertmanagerStatus``."""
    cluster: ClusterStatus
    versionInfo: VersionInfo
    config: AlertmanagerConfig
    uptime: datetime


_BAD = {"model": str, "description": "Bad request: a text naming each bad field"}
_NOT_FOUND = {"model": str, "description": "No silence with that id"}


def parse_filters(values: list[str] | None, field: str = "filter") -> list[Matcher]:
    """The matcher of every ``filter`` value, one each as Alertmanager's ``compat.Matcher``
    (``a="1"``; braces allowed, ``{a="1"}``). Raises ``FieldError`` (400)."""
    out: list[Matcher] = []
    for text in values or []:
        try:
            out.append(parse_matcher(text))
        except ValueError as e:
            raise FieldError(field, str(e), MATCHER_FORMS, "matcher") from None
    return out


def filter_matches(matchers: list[Matcher], labels: dict[str, str]) -> bool:
    """Alertmanager's ``matchFilterLabels``: every matcher matches ``labels``,
    except that ``name=""`` passes when the label is absent and
    ``name!=""`` passes when it is present."""
    for m in matchers:
        present = m.name in labels
        if m.value == "" and (not present if m.op.is_equal else present):
            continue
        if not m.matches(labels):
            return False
    return True


def silence_matches_filter(matchers: list[Matcher], silence: list[dict[str, str]]) -> bool:
    """Alertmanager's ``CheckSilenceMatchesFilterLabels`` (api/v2/api.go): each filter matcher
    is one of the silence's matchers, same name, operator and value as written (``a=~"x.*"``
    finds the silence ``a=~"x.*"``, not ``a="xy"``). ``silence``: its stored
    ``{"name", "op", "value"}`` matchers."""
    have = {(m["name"], m["op"], m["value"]) for m in silence}
    return all((m.name, m.op.value, m.value) in have for m in matchers)


def receiver_filter(pattern: str | None) -> Callable[[list[dict]], bool] | None:
    """A predicate for the anchored ``receiver`` regex; ``FieldError`` (400) if invalid. An
    empty value filters nothing: go-swagger binds ``receiver=`` as absent."""
    if not pattern:
        return None
    rx, problem = compile_regex(pattern)
    if problem is not None:
        raise FieldError("receiver", f"is not a valid regex: {problem}",
                         "a regex (RE2 syntax) such as oncall|ops.*", "regex")
    return lambda receivers: any(regex_hit(rx, r.get("name", "")) for r in receivers)


def _am_matcher(m: dict[str, str]) -> dict[str, Any]:
    op = MatchOp(m["op"])
    return {"name": m["name"], "value": m["value"], "isRegex": op.is_regex, "isEqual": op.is_equal}


def gettable_silence(d: dict[str, Any], now: float) -> dict[str, Any]:
    """A stored silence as Alertmanager's ``gettableSilence``."""
    return {"id": d["id"], "status": {"state": silence_state(d, now)},
            "updatedAt": format_time(d.get("updated_at") or d["starts_at"]),
            "matchers": [_am_matcher(m) for m in d["matchers"]],
            "startsAt": format_time(d["starts_at"]),
            "endsAt": format_time(d["ends_at"]) if d.get("ends_at") is not None else FAR_FUTURE,
            "createdBy": d["author"], "comment": d["comment"]}


def sort_silences(items: list[dict[str, Any]], now: float) -> list[dict[str, Any]]:
    """Alertmanager's order: active (ending soonest first), pending (starting
    soonest first), expired (ended most recently first)."""
    def key(d: dict[str, Any]) -> tuple:
        state = silence_state(d, now)
        ends = d["ends_at"] if d.get("ends_at") is not None else float("inf")
        if state == "active":
            return (0, ends)
        if state == "pending":
            return (1, d["starts_at"])
        return (2, -ends)
    return sorted(items, key=key)


def _ts(value: datetime, field: str) -> float:
    """Epoch seconds of ``value`` (UTC when it has no zone); FieldError naming ``field`` when it
    lies outside the years an RFC 3339 time names in UTC (it could not be listed back)."""
    ts = (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).timestamp()
    if not in_range(ts):
        raise FieldError(field, OUT_OF_RANGE, "a time within the years 0001-9999 in UTC", "range")
    return ts


def _duration(seconds: float) -> str:
    """Seconds as an Alertmanager duration in its largest whole unit (``4h``)."""
    ms = round(seconds * 1000)
    if ms == 0:
        return "0s"
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def _am_names(names: list[str]) -> list[str]:
    """Plait's ``rule`` is Alertmanager's ``alertname`` (as in ``groupLabels``)."""
    return ["alertname" if n == "rule" else n for n in names]


def _am_matchers(texts: list[str]) -> list[str]:
    """Matchers with ``rule`` spelt ``alertname``."""
    out = []
    for m in (parse_matcher(t) for t in texts):
        out.append(str(Matcher("alertname", m.op, m.value) if m.name == "rule" else m))
    return out


def _am_receiver(r: Any) -> dict[str, Any]:
    return {"name": r.name, **receiver_type(r.type).am_status(r)}


def _am_route(route: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if route.receiver:
        out["receiver"] = route.receiver
    if route.group_by is not None:
        out["group_by"] = _am_names(route.group_by)
    for name in ("group_wait", "group_interval", "repeat_interval"):
        if getattr(route, name) is not None:
            out[name] = _duration(getattr(route, name))
    out["matchers"] = _am_matchers(route.matchers)
    if route.continue_:
        out["continue"] = True
    for name in ("mute_time_intervals", "active_time_intervals"):
        if getattr(route, name):
            out[name] = list(getattr(route, name))
    if route.routes:
        out["routes"] = [_am_route(r) for r in route.routes]
    return out


def alertmanager_config(config: Any) -> str:
    """The alerting config as an Alertmanager configuration file (Alertmanager's
    "Configuration" doc), for ``config.original`` and ``amtool config routes``:
    secrets ``<secret>``, ``rule`` as ``alertname``, Plait-only settings left
    out; "" without a config."""
    if config is None:
        return ""
    t = config.timing
    route = {"receiver": config.route.receiver, "group_by": _am_names(config.grouping.group_by),
             "group_wait": _duration(t.group_wait), "group_interval": _duration(t.group_interval),
             "repeat_interval": _duration(t.repeat_interval)}
    if config.route.routes:
        route["routes"] = [_am_route(r) for r in config.route.routes]
    doc: dict[str, Any] = {"global": {"resolve_timeout": _duration(t.resolve_timeout)},
                           "route": route, "receivers": [_am_receiver(r) for r in config.receivers]}
    if config.inhibit_rules:
        doc["inhibit_rules"] = [{"source_matchers": _am_matchers(r.source_matchers),
                                 "target_matchers": _am_matchers(r.target_matchers),
                                 "equal": _am_names(r.equal)} for r in config.inhibit_rules]
    if config.time_intervals:
        doc["time_intervals"] = [
            {"name": ti.name, "time_intervals": [
                {k: v for k, v in i.model_dump(mode="json").items() if v not in ([], None)}
                for i in ti.time_intervals]} for ti in config.time_intervals]
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("plait")
    except Exception:
        return "unknown"


router = APIRouter(**AM_ROUTER)


async def current(state: Alerting, silences: SilenceStore, ingest: AlertIngest,
                  now: float) -> list[dict[str, Any]]:
    """Every current alert with its status at ``now`` (silences applied now)."""
    views = state.recent.merge(await read_views(state.redis(), state.settings.redis_prefix,
                                                range(await ingest.funnel_partitions())), now)
    active = await silences.active(now)
    seen_of = []
    for v in views:
        m = v.pop("_m", None) or {}
        seen = dict(v.get("labels") or {})
        seen.setdefault("alertname", m.get("rule", ""))
        seen.update(m)
        seen_of.append((v.get("fingerprint", ""), seen))
    muted = inhibited_now(seen_of, state.config) if state.config is not None else {}
    out = []
    for v, (fp, seen) in zip(views, seen_of):
        status = v.get("status") or {}
        silenced = {sid for sid in status.get("silencedBy") or [] if sid in active}
        silenced |= {sid for sid, s in active.items()
                     if s.matches(seen, now)}
        inhibited = list(status.get("inhibitedBy") or []) or muted.get(fp, [])
        v["status"] = {"state": "suppressed" if silenced or inhibited else "active",
                       "silencedBy": sorted(silenced), "inhibitedBy": inhibited}
        out.append(v)
    return out


def keep(v: dict[str, Any], matchers: list[Matcher], receivers, active: bool,
         silenced: bool, inhibited: bool, unprocessed: bool = True) -> bool:
    """Whether alert view ``v`` passes ``getAlerts``' filters."""
    st = v["status"]
    if receivers is not None and not receivers(v.get("receivers") or []):
        return False
    if not filter_matches(matchers, v.get("labels") or {}):
        return False
    if not active and st["state"] == "active":
        return False
    if not unprocessed and st["state"] == "unprocessed":
        return False
    if not silenced and st["silencedBy"]:
        return False
    if not inhibited and st["inhibitedBy"]:
        return False
    return True


def may_manage_silences(caller: Caller | None) -> None:
    """Raises Forbidden (403) unless ``caller`` (if any) has ``silenceManage``."""
    if caller is not None and not caller.silenceManage:
        raise Forbidden(f"caller {caller.sysCode} may not manage silences: its registry "
                        "entry needs 'silenceManage: true'")


@router.post("/api/v2/alerts", response_class=Response, responses={
    200: {"description": "Alerts accepted: no body (X-Plait-Accepted: how many)"},
    400: _BAD}, openapi_extra={"requestBody": {
    "required": True, "description": "postableAlerts: a list of alerts",
    "content": {"application/json": {"schema": {
        "type": "array", "items": PostableAlert.model_json_schema()}}}}})
async def post_alerts(request: Request, state: Alerting = Depends(get_alerting),
                      ingest: AlertIngest = Depends(get_ingest)):
    """Create alerts (``postAlerts``): each valid alert goes on; the bad
    ones are answered with 400 naming their index and field."""
    now = time.time()
    doc, replaced = await read_body(request, "a list of Alertmanager postableAlert objects")
    if doc is None:  # go-swagger binds a JSON null to no alerts: Alertmanager answers 200
        doc = []
    if not isinstance(doc, list):
        raise AlertRejected("body", f"must be a JSON list of alerts, got {type(doc).__name__}",
                            "a list of Alertmanager postableAlert objects", "type")
    if len(doc) > MAX_ALERTS:
        raise AlertRejected("body", f"has {len(doc)} alerts", f"at most {MAX_ALERTS}", "size")
    good, errors, indexes = [], [], []
    for i, a in enumerate(doc):
        try:
            good.append((f"[{i}].", from_alertmanager_alert(a, now, prefix=f"[{i}].",
                                                            **state.options)))
            indexes.append(i)
        except AlertRejected as e:
            errors.append((i, e))
    ids: list[str] = []
    if good:
        ids, too_large = await ingest.publish(good, "plait-api-v2", now, state.config)
        errors = sorted(errors + [(indexes[pos], e) for pos, e in too_large], key=lambda r: r[0])
        # listed at once by the GET routes (read your writes)
        sent = set(range(len(good))) - {pos for pos, _e in too_large}
        for pos in sorted(sent) if state.config is not None else ():
            state.recent.add(good[pos][1], state.config, now)
    headers = {"X-Plait-Accepted": str(len(ids))}
    if replaced:
        headers["X-Plait-Replaced-Characters"] = str(replaced)
    if errors:
        REFUSED.labels("/api/v2/alerts").inc(len(errors))
        err = RequestInvalid([e for _i, e in errors])
        err.message = (f"{len(errors)} of {len(doc)} alerts refused, {len(ids)} accepted: "
                       + err.message)
        raise err
    return Response(status_code=200, headers=headers)


@router.get("/api/v2/alerts", responses={200: {"model": list[GettableAlert]}, 400: _BAD})
async def get_alerts(active: bool = True, silenced: bool = True, inhibited: bool = True,
                     unprocessed: bool = True,
                     filter: list[str] | None = Query(None, description="matchers"),
                     receiver: str | None = Query(None, description="regex on receiver names"),
                     state: Alerting = Depends(get_alerting),
                     silences: SilenceStore = Depends(silence_store),
                     ingest: AlertIngest = Depends(get_ingest)):
    """Current (firing) alerts with their status (``getAlerts``), sorted by
    fingerprint; an alert ``continue`` routes took to several receivers
    is listed once with all of them in route order, as Alertmanager lists it
    (``route.Match``: depth first, which the route ids' paths give)."""
    now = time.time()
    matchers, receivers = parse_filters(filter), receiver_filter(receiver)
    alerts: dict[str, dict[str, Any]] = {}
    routed: dict[str, list[tuple[tuple[int, ...], str]]] = {}
    for v in await current(state, silences, ingest, now):
        v.pop("_group", None)
        path = _route_path(v.pop("_route", None))
        fp = v.get("fingerprint", "")
        alerts.setdefault(fp, v)
        routed.setdefault(fp, []).extend((path, r["name"]) for r in v.get("receivers") or [])
    for fp, v in alerts.items():
        v["receivers"] = [{"name": n} for n in dict.fromkeys(n for _p, n in sorted(routed[fp]))]
    out = [v for v in alerts.values()
           if keep(v, matchers, receivers, active, silenced, inhibited, unprocessed)]
    out.sort(key=lambda v: v.get("fingerprint", ""))
    return JSONResponse(out)


@router.get("/api/v2/alerts/groups", responses={200: {"model": list[AlertGroup]}, 400: _BAD})
async def get_alert_groups(active: bool = True, silenced: bool = True, inhibited: bool = True,
                           filter: list[str] | None = Query(None, description="matchers"),
                           receiver: str | None = Query(None, description="regex on receiver names"),
                           state: Alerting = Depends(get_alerting),
                           silences: SilenceStore = Depends(silence_store),
                           ingest: AlertIngest = Depends(get_ingest)):
    """Current alerts by receiver and group labels (``getAlertGroups``), in Alertmanager's order
    (dispatch/dispatch.go ``Groups``): groups by ``AlertGroups.Less`` (group labels by
    ``LabelSet.Before``, equal labels by receiver), each group's alerts by
    ``types.AlertSlice.Less``; an alert lists every receiver it reached, by name."""
    now = time.time()
    matchers, receivers = parse_filters(filter), receiver_filter(receiver)
    groups: dict[tuple, dict[str, Any]] = {}
    reached: dict[str, set[str]] = {}
    for v in await current(state, silences, ingest, now):
        if not keep(v, matchers, receivers, active, silenced, inhibited):
            continue
        glabels = am_group_labels(v.pop("_group", None) or {})
        route = v.pop("_route", None) or "0"  # Alertmanager: a group per route and labels
        for r in v.get("receivers") or []:
            reached.setdefault(v.get("fingerprint", ""), set()).add(r["name"])
            key = (tuple(sorted(glabels.items())), r["name"], _route_path(route))
            g = groups.setdefault(key, {"labels": glabels, "receiver": {"name": r["name"]},
                                        "alerts": []})
            g["alerts"].append(v)
    for v in {id(v): v for g in groups.values() for v in g["alerts"]}.values():
        v["receivers"] = [{"name": n} for n in sorted(reached[v.get("fingerprint", "")])]
    for g in groups.values():
        g["alerts"].sort(key=functools.cmp_to_key(lambda a, b: am_compare(a["labels"],
                                                                          b["labels"])))

    def less(a: tuple, b: tuple) -> int:  # AlertGroups.Less; the route when both tie
        la, lb = groups[a]["labels"], groups[b]["labels"]
        if la != lb:
            return -1 if labels_before(la, lb) else 1
        return -1 if a[1:] < b[1:] else 1 if a[1:] > b[1:] else 0
    return JSONResponse([groups[k] for k in sorted(groups, key=functools.cmp_to_key(less))])


def _route_path(route_id: str | None) -> tuple[int, ...]:
    """A route id (``0.2.1``) as its path, which orders routes as ``route.Match`` walks them."""
    return tuple(int(p) for p in (route_id or "0").split(".") if p.isdigit())


@router.get("/api/v2/silences", responses={200: {"model": list[GettableSilence]}, 400: _BAD})
async def get_silences(filter: list[str] | None = Query(None, description="matchers"),
                        creator: list[str] | None = Query(None, description="createdBy values"),
                             silences: SilenceStore = Depends(silence_store)):
    """Every silence (``getSilences``), Alertmanager's order."""
    now = time.time()
    matchers = parse_filters(filter)
    out = []
    for d in sort_silences(await silences.all(), now):
        if matchers and not silence_matches_filter(matchers, d["matchers"]):
            continue
        if creator and d["author"] not in creator:
            continue
        out.append(gettable_silence(d, now))
    return JSONResponse(out)


@router.post("/api/v2/silences", responses={200: {"model": SilenceCreated}, 400: _BAD,
                                            404: _NOT_FOUND})
async def post_silences(silence: PostableSilence = Body(...),
                        caller: Caller | None = Depends(bearer),
                        silences: SilenceStore = Depends(silence_store)):
    """Create a silence, or update the one named by ``id`` (``postSilences``)."""
    may_manage_silences(caller)
    now = time.time()
    body, _replaced = scrub_text(silence.model_dump())
    matchers = []
    for i, m in enumerate(body["matchers"]):
        try:
            matchers.append(parse_matcher(m))
        except ValueError as e:
            accepted = ("a valid regex (RE2 syntax) when isRegex is true" if "bad regex" in str(e)
                        else "a non-empty string name and a string value")
            raise FieldError(f"matchers.{i}", str(e), accepted, "matcher") from None
    try:
        created = await silences.set(body.get("id"), matchers, _ts(silence.startsAt, "startsAt"),
                                     _ts(silence.endsAt, "endsAt"), body["createdBy"],
                                     body["comment"], now)
    except SilenceRefused as e:
        raise FieldError(public_field(e.field), public_text(e.rule).replace(
            "or allowBroad: true", "(the Alertmanager API has no allowBroad; use POST "
            "/silences)"), public_text(e.accepted) if e.accepted else None, e.code) from None
    return JSONResponse({"silenceID": created.id})


@router.get("/api/v2/silence/{silenceID}",
            responses={200: {"model": GettableSilence}, 404: _NOT_FOUND})
async def get_silence(silenceID: str,  # noqa: N803 - Alertmanager's parameter name
                      silences: SilenceStore = Depends(silence_store)):
    """One silence (``getSilence``); 404 when unknown."""
    d = await silences.get(silenceID)
    if d is None:
        raise NotFound(f"silence {silenceID} not found")
    return JSONResponse(gettable_silence(d, time.time()))


@router.delete("/api/v2/silence/{silenceID}", response_class=Response, responses={
    200: {"description": "Expired: no body"}, 404: _NOT_FOUND})
async def delete_silence(silenceID: str,  # noqa: N803
                         caller: Caller | None = Depends(bearer),
                         silences: SilenceStore = Depends(silence_store)):
    """Expire a silence now (``deleteSilence``); 200 with no body; 404 when
    unknown; expiring an expired silence is a no-op."""
    may_manage_silences(caller)
    await silences.expire(silenceID, time.time())
    return Response(status_code=200)


@router.get("/api/v2/status", responses={200: {"model": AlertmanagerStatus}})
async def get_status(state: Alerting = Depends(get_alerting)):
    """Status (``getStatus``): no cluster; the alerting config as Alertmanager's
    (:func:`alertmanager_config`), secrets redacted."""
    return JSONResponse({
        # no cluster: Alertmanager then leaves out the name (api/v2/api.go getStatusHandler)
        "cluster": {"status": "disabled", "peers": []},
        "versionInfo": {"version": _version(), "revision": "", "branch": "plait",
                        "buildUser": "", "buildDate": "", "goVersion": "none (Plait, Python)"},
        "config": {"original": alertmanager_config(state.config)},
        "uptime": format_time(_STARTED)})


@router.post("/-/reload", response_class=Response, responses={
    200: {"description": "The file was valid and is in use: no body"},
    400: {"model": str, "description": "The file is invalid: `failed to reload config: "
          "<key>: <problem>`; the configuration in use stays"}})
async def reload_config(state: Alerting = Depends(get_alerting)):
    """Re-read the configuration file (Alertmanager's ``POST /-/reload``), here and in every
    alerting worker: the next POST's routes are decided with it, and a worker on another version
    routes them again (``cfg``, :mod:`alerting.commands`). Answers once each worker listening
    put it in use (:func:`reload_workers`, at most ``RELOAD_WAIT`` s; ``X-Plait-Workers-Reloaded:
    n/m``), 500 naming a worker that refused its file (this process reloaded). Behind the same
    bearer gate as ``/api/v2``. The file is read and checked off the event loop (templates
    compile, url_file reads), so other requests are not held meanwhile."""
    try:
        await run_in_threadpool(state.reload)
    except ConfigError as e:  # Alertmanager answers 500; a bad file is not a server fault
        return Response(f"failed to reload config: {e}", status_code=400,
                        media_type="text/plain; charset=utf-8")
    answers, asked = await reload_workers(state)
    refused = {w: why for w, why in answers.items() if why != "ok"}
    headers = {"X-Plait-Workers-Reloaded": f"{len(answers) - len(refused)}/{asked}"}
    if refused:
        worker, why = sorted(refused.items())[0]
        return Response(f"failed to reload config: worker {worker}: {why} (the API reloaded; "
                        "that worker keeps its configuration)", status_code=500,
                        headers=headers, media_type="text/plain; charset=utf-8")
    return Response(status_code=200, headers=headers)


#: Longest ``POST /-/reload`` waits for the workers' answers (s).
RELOAD_WAIT = 10.0


async def reload_workers(state: Alerting) -> tuple[dict[str, str], int]:
    """Ask every alerting worker to re-read its file (``P:alerts:reload``) and wait up to
    :data:`RELOAD_WAIT` s for the answers of those listening: ``({worker: "ok" | why}, asked)``;
    ``({}, 0)`` when Redis does not answer (SIGHUP still reloads a worker)."""
    from redis.exceptions import RedisError

    prefix, request = state.settings.redis_prefix, uuid.uuid4().hex
    redis = state.redis()
    try:
        asked = await redis.publish(K.alert_reload(prefix), request)
        deadline = time.monotonic() + RELOAD_WAIT
        while True:
            answers = {k.decode(): v.decode(errors="replace") for k, v in
                       (await redis.hgetall(K.alert_reloaded(prefix, request))).items()}
            if len(answers) >= asked or time.monotonic() > deadline:
                return answers, asked
            await asyncio.sleep(0.05)
    except (RedisError, OSError) as e:
        log.warning("POST /-/reload cannot ask the workers; they reload on SIGHUP",
                    error=str(e))
        return {}, 0


@router.get("/api/v2/receivers", responses={200: {"model": list[Receiver]}})
async def get_receivers(state: Alerting = Depends(get_alerting)):
    """Receiver names of the alerting config (``getReceivers``)."""
    names = [r.name for r in state.config.receivers] if state.config is not None else []
    return JSONResponse([{"name": n} for n in names])
