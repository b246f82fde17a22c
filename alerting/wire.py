"""What the alert funnel's Kafka topics carry (the API, producers and agents' contract).

``alerts.raw`` (any key; the router re-keys), UTF-8 JSON: a CloudEvents envelope (``type``
``plait.alert.Raw.v1``) whose ``data`` is an alert, a list, or ``{"alerts": [...], "receivedAt":
epoch s}``; or a bare alert (native or Alertmanager) or list. Raw ids: ``<envelope id>:<index>``
(a re-sent envelope is recognised), else ``<partition>@<offset>:<index>``. Not JSON, not an
object/list or over :data:`MAX_ALERTS` alerts is poison (``export.dlq``); an invalid alert ends
``rejected`` in the ledger, naming the field.

``alerts.funnel`` (keyed by receiver: its bucket, groups and in-flight message on one partition):
``{"v": 1, "kind": ...}`` with kind ``alert`` (normalized alert or invalid payload, ``receiver``,
``fp``, ``tp`` traceparent), ``alerts`` (``items``: at most :data:`MAX_ITEMS`, about
:data:`MAX_COMMAND_BYTES`), ``sources`` (``items``: inhibition sources from other partitions,
:func:`source_copies`), ``tick``, ``result``, ``silence``, ``expire``; the last five go to an
explicit partition.

``alerts.ledger`` (keyed by funnel partition, so outcomes stay in order): ``{"v": 2, "partition",
"entries": [LedgerEntry + partition]}``, at most :data:`MAX_LEDGER_ENTRIES` entries and about
:data:`MAX_LEDGER_BYTES`; :func:`ledger_entries` also reads version 1 (one bare entry).
"""
from __future__ import annotations

import functools
import json
import math
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable

import orjson
from aiokafka.partitioner import murmur2

from alerting.config import AlertingConfig
from alerting.model import Alert, AlertRejected, Severity
from alerting.intake import normalize, repair_text
from alerting.matchers import Matcher, parse_matcher
from alerting.routing import decide, routes_for
from plait.clock import utcnow_iso
from plait.errors import PoisonError
from plait.records import MAX_RECORD_BYTES
from plait.topics import ALERTS_FUNNEL

RAW_TYPE = "plait.alert.Raw.v1"
FUNNEL_TOPIC = ALERTS_FUNNEL
#: Most alerts one raw event may carry (Alertmanager batches are ~64).
MAX_ALERTS = 10_000
_MAX_INVALID_BYTES = 16_384
#: Most alerts one ``alerts`` command carries.
MAX_ITEMS = 500
#: Most bytes of one ``alerts`` command record (key and JSON value).
MAX_COMMAND_BYTES = MAX_RECORD_BYTES
#: Most entries one ``alerts.ledger`` record carries, and its most bytes (key and JSON value).
MAX_LEDGER_ENTRIES = 1000
MAX_LEDGER_BYTES = MAX_RECORD_BYTES
LEDGER_VERSION = 2


@dataclass(frozen=True)
class RawAlert:
    """One alert of ``alerts.raw``: raw id, payload as sent, receipt time (epoch s; decides
    Alertmanager firing/resolved from ``endsAt``) and the event's ``source``."""

    raw_id: str
    payload: Any
    received_at: float
    source: str = ""  # the envelope's ``source`` (``plait-api``, ``plait-api-v2``, ...)


def ordering_key(alert: Any) -> str:
    """Kafka key of a raw alert: rule|asset as sent, so one alert's changes stay in order."""
    if not isinstance(alert, dict):
        return ""
    labels = alert.get("labels") if isinstance(alert.get("labels"), dict) else {}
    rule = alert.get("rule") or labels.get("alertname") or ""
    asset = alert.get("asset") or labels.get("instance") or labels.get("asset") or ""
    return repair_text(f"{rule}|{asset}")[0]  # always encodable as UTF-8


def raw_envelope(alerts: list[Any], source: str = "plait-api",
                 received_at: float | None = None, event_id: str | None = None) -> tuple[str, bytes]:
    """``(event id, UTF-8 JSON bytes)`` of an ``alerts.raw`` event carrying ``alerts``; raw ids are
    ``<event id>:<i>``. Lone surrogates travel as ``\\u`` escapes for intake to repair."""
    eid = event_id or uuid.uuid4().hex
    env = {"specversion": "1.0", "id": eid, "source": source, "type": RAW_TYPE,
           "time": utcnow_iso(), "datacontenttype": "application/json",
           "data": {"alerts": alerts,
                    "receivedAt": time.time() if received_at is None else received_at}}
    return eid, _json_bytes(env)


def _loads(value: bytes | str) -> Any:
    """JSON to Python: orjson, else the stdlib for what only it takes (lone surrogates, ``NaN``,
    huge integers). Raises ValueError when neither parses it."""
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return json.loads(value)


def _json_bytes(doc: Any) -> bytes:
    """Compact UTF-8 JSON; ASCII escapes when a string holds a lone surrogate."""
    text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False, default=str)
    try:
        return text.encode()
    except UnicodeEncodeError:
        return json.dumps(doc, separators=(",", ":"), default=str).encode()


def parse_raw(value: bytes | str | None, partition: int, offset: int,
              now: float) -> list[RawAlert]:
    """The alerts of one ``alerts.raw`` event. Raises PoisonError: not JSON, not an object or
    list, or too many alerts."""
    if value is None:
        raise PoisonError("empty alerts.raw event")
    try:
        doc = _loads(value)
    except (ValueError, UnicodeDecodeError) as e:
        raise PoisonError(f"alerts.raw event is not JSON: {e}") from None
    base, received, source = f"{partition}@{offset}", now, ""
    if isinstance(doc, dict) and "specversion" in doc and "data" in doc:
        base, source = str(doc.get("id") or base), str(doc.get("source") or "")[:200]
        doc = doc["data"]
        if isinstance(doc, dict) and isinstance(doc.get("alerts"), list):
            r = doc.get("receivedAt")
            if isinstance(r, (int, float)) and not isinstance(r, bool):
                try:  # NaN, Infinity, 1e400 and integers past a float: the worker's clock
                    received = float(r) if math.isfinite(r) else now
                except OverflowError:
                    pass
            doc = doc["alerts"]
    items = doc if isinstance(doc, list) else [doc] if isinstance(doc, dict) else None
    if items is None:
        raise PoisonError(f"alerts.raw event must be a JSON object or list, got {type(doc).__name__}")
    if len(items) > MAX_ALERTS:
        raise PoisonError(f"alerts.raw event carries {len(items)} alerts (most {MAX_ALERTS})")
    return [RawAlert(f"{base}:{i}", a, received, source) for i, a in enumerate(items)]


def receiver_for(config: AlertingConfig, alert: Alert) -> str:
    """The receiver of the first route an alert reaches (:func:`alerting.routing.routes_for`)."""
    return routes_for(config, alert.match_labels())[0].receiver


def normalize_options(config: AlertingConfig | None) -> dict[str, Any]:
    """Keyword options of :func:`alerting.intake.normalize` from the config."""
    if config is None:
        return {}
    return {"asset_labels": tuple(config.normalize.asset_labels),
            "default_severity": Severity[config.normalize.default_severity.upper()],
            "resolve_timeout": config.timing.resolve_timeout}


def route_alerts(config: AlertingConfig, raw: RawAlert) -> list[tuple[str, dict[str, Any]]]:
    """``[(receiver = Kafka key, command)]``, never empty: one ``alert`` command per route the raw
    alert reaches, decided once (:func:`alerting.routing.decide`). A ``continue`` copy has raw id
    ``<raw id>~<receiver>``, fingerprint ``<fp>~<route id>`` and ``copy`` (docs/alerting.md,
    "Routes"). An alert that does not normalize goes to the default receiver with its payload
    (cut to 16 KB) to be ledgered ``rejected``."""
    cmd: dict[str, Any] = {"v": 1, "kind": "alert", "id": raw.raw_id,
                           "received_at": raw.received_at}
    try:
        alert = normalize(raw.payload, raw.received_at, **normalize_options(config))
    except AlertRejected as e:
        text = json.dumps(raw.payload, default=str)[:_MAX_INVALID_BYTES]
        return [(config.route.receiver, dict(cmd, invalid=text, reason=str(e)))]
    return decided_commands(config, alert, cmd)


def decided_commands(config: AlertingConfig | None, alert: Alert,
                     cmd: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``[(receiver, command)]``: ``cmd`` (``id``, ``received_at``, ...)
    with the normalized ``alert`` and one decision per route it reaches
    (:func:`alerting.routing.decide`), further copies as
    :func:`route_alerts` names them; a forged alert (``decide`` raises) goes
    undecided to the default receiver, for the funnel to reject. Without a
    ``config`` the command goes undecided (receiver ``""``): the funnel
    routes it (:func:`alerting.commands.read_alert_command`)."""
    if config is None:
        return [("", dict(cmd, alert=alert.to_state()))]
    try:
        decisions = decide(config, alert)
    except Exception:  # a forged alert: the funnel decides (and rejects it) itself
        return [(config.route.receiver, dict(cmd, alert=alert.to_state()))]
    doc, rid = alert.to_state(), cmd["id"]
    out = []
    for k, d in enumerate(decisions):
        c = dict(cmd, alert=doc, **d.to_dict())
        if k:
            c.update(id=f"{rid}~{d.receiver}", copy=k)
        out.append((d.receiver, c))
    return out


def funnel_partition(receiver: str, partitions: int) -> int:
    """The ``alerts.funnel`` partition of ``receiver``'s state: Kafka's
    default partitioner on the name (murmur2, positive, modulo the count),
    where the workers' sends keyed by receiver land (aiokafka's, Faust's)."""
    return (murmur2(receiver.encode()) & 0x7FFFFFFF) % partitions


def route_alert(config: AlertingConfig, raw: RawAlert) -> tuple[str, dict[str, Any]]:
    """The first of :func:`route_alerts`."""
    return route_alerts(config, raw)[0]


def pack_alerts(items: list[tuple[Any, bytes]], key: bytes = b"",
                kind: str = "alerts") -> list[bytes]:
    """``alerts`` (or ``kind``) commands carrying ``items`` (``(command, JSON bytes)``) in order, at
    most :data:`MAX_ITEMS` each and :data:`MAX_COMMAND_BYTES` with ``key``; an item too large alone
    is left out (:func:`fits_command`)."""
    head, tail = b'{"v":1,"kind":"%s","items":[' % kind.encode(), b"]}"
    room = MAX_COMMAND_BYTES - len(key) - len(head) - len(tail)
    return [head + b",".join(chunk) + tail
            for chunk in _cut([data for _cmd, data in items if len(data) <= room], room, MAX_ITEMS)]


@functools.lru_cache(maxsize=16)
def _source_sides(rules: tuple[tuple[str, ...], ...]) -> list[list[Matcher]]:
    return [[parse_matcher(m) for m in side] for side in rules]


def source_copies(config: AlertingConfig | None, alert: Alert, fp: str, taken: set[int],
                  partition_of: Callable[[str], int]) -> dict[int, bytes]:
    """``{partition: item JSON bytes}``: the item of a ``sources`` command for each
    ``alerts.funnel`` partition holding a receiver's state but none of the alert's routes
    (``taken``), when the alert matches the source side of an inhibit rule; else ``{}``. The
    item is ``{"fp", "labels" (the labels matchers see), "status", "ends_at"}``: what an
    inhibition index needs, so an alert inhibits its targets whatever partition their receiver's
    groups live on (docs/alerting.md, "Inhibition"). ``partition_of``: a receiver name's
    partition (:func:`funnel_partition`)."""
    if config is None or not config.inhibit_rules:
        return {}
    labels = alert.match_labels()
    sides = _source_sides(tuple(tuple(r.source_matchers) for r in config.inhibit_rules))
    if not any(all(m.matches(labels) for m in side) for side in sides):
        return {}
    parts = {partition_of(r.name) for r in config.receivers} - taken
    if not parts:
        return {}
    return dict.fromkeys(sorted(parts), orjson.dumps({
        "fp": fp, "labels": labels, "status": alert.status.value, "ends_at": alert.ends_at}))


def fits_command(data: bytes, key: bytes = b"") -> bool:
    """Whether an ``alert`` command's JSON fits an ``alerts`` command of its own with ``key``."""
    return len(data) + len(key) + len(b'{"v":1,"kind":"alerts","items":[]}') <= MAX_COMMAND_BYTES


def too_large_command(cmd: dict[str, Any], size: int) -> bytes:
    """The ``alert`` command replacing oversize ``cmd`` (``size`` bytes): no alert, so the funnel
    ledgers it ``rejected`` saying why (the alert is kept in ``export.dlq``)."""
    keep = {k: cmd[k] for k in ("id", "src", "received_at", "copy", "receiver") if k in cmd}
    return command("alert", **keep, reason=f"(alert): {size} bytes as an alerts.funnel command, "
                                           f"most {MAX_COMMAND_BYTES}; kept in export.dlq")


def _cut(parts: list[bytes], room: int, most: int) -> list[list[bytes]]:
    """``parts`` (each at most ``room``) in runs of at most ``most`` whose joined bytes fit."""
    out: list[list[bytes]] = []
    chunk: list[bytes] = []
    size = -1
    for data in parts:
        if chunk and (len(chunk) >= most or size + 1 + len(data) > room):
            out.append(chunk)
            chunk, size = [], -1
        chunk.append(data)
        size += 1 + len(data)
    if chunk:
        out.append(chunk)
    return out


def command(kind: str, **fields: Any) -> bytes:
    """An ``alerts.funnel`` command as JSON bytes: orjson (one per alert), the stdlib for what it
    refuses. orjson writes NaN as ``null``: command numbers are finite by construction."""
    doc = {"v": 1, "kind": kind, **fields}
    try:
        return orjson.dumps(doc, default=str)
    except TypeError:
        return _json_bytes(doc)


def parse_command(value: bytes | str | None) -> dict[str, Any]:
    """Decode an ``alerts.funnel`` command. Raises PoisonError: not an object with a known kind."""
    try:
        doc = _loads(value) if value is not None else None
    except (ValueError, UnicodeDecodeError) as e:
        raise PoisonError(f"alerts.funnel event is not JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("kind") not in (
            "alert", "alerts", "sources", "tick", "result", "silence", "expire"):
        raise PoisonError("alerts.funnel event is not a funnel command")
    return doc


def ledger_records(partition: int, entries: list[dict[str, Any]]) -> list[bytes]:
    """``alerts.ledger`` records (version 2) of ``entries`` of funnel ``partition``: at most
    :data:`MAX_LEDGER_ENTRIES` each, cut past :data:`MAX_LEDGER_BYTES`; none for no entries."""
    head = b'{"v":2,"partition":%d,"entries":[' % partition
    room = MAX_LEDGER_BYTES - len(head) - 2 - len(str(partition))  # the key: the partition
    return [head + b",".join(chunk) + b"]}"
            for chunk in _cut([_ledger_entry_bytes(e, room) for e in entries], room,
                              MAX_LEDGER_ENTRIES)]


def _ledger_entry_bytes(entry: dict[str, Any], room: int = MAX_LEDGER_BYTES) -> bytes:
    """One entry's JSON within ``room`` bytes: past it ``inhibited_by`` keeps its first fps (with
    ``inhibited_by_count``) and ``reason`` its start."""
    try:
        data = orjson.dumps(entry)
    except TypeError:  # not plain JSON data (a lone surrogate...): the stdlib's rules
        data = json.dumps(entry, separators=(",", ":"), default=str).encode()
    if len(data) <= room:
        return data
    e = {k: (repair_text(v)[0][:1024] if isinstance(v, str) else v) for k, v in entry.items()}
    by = e.get("inhibited_by") or []
    if by:
        e["inhibited_by"], e["inhibited_by_count"] = list(by[:(room - 8192) // 40]), len(by)
    return orjson.dumps(e, default=str)


def ledger_entries(value: bytes | str | None) -> list[dict[str, Any]]:
    """The entries of one ``alerts.ledger`` record (version 2 or 1), else []. Raises ValueError
    when it is not JSON."""
    if value is None:
        return []
    doc = orjson.loads(value)
    if isinstance(doc, dict) and doc.get("v") == LEDGER_VERSION and isinstance(doc.get("entries"), list):
        return doc["entries"]
    return [doc] if isinstance(doc, dict) and "raw_id" in doc else []
