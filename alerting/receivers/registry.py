"""Receiver types by ``type``. Each type's module in :mod:`alerting.receivers`
calls :func:`register` at import; the package's modules are all imported on
the first lookup, so a new type is one new module. Parts (all required):
``requests(message, receiver, external_url, timestamp) -> [Request]``
(empty: nothing to send); ``am_requests(message, receiver, templates,
external_url, timestamp)`` for an ``alertmanager.yml`` receiver;
``am_status(receiver) -> {"<kind>_configs": [...]}`` for ``/api/v2/status``
(``{}``: none); ``check(receiver)`` raising ``ValueError("<key>: ...")``;
``am_kind`` (``""``: none) and ``am_file``, how ``alertmanager.yml`` reads
that integration (:class:`AmFile`; None without ``am_kind``); ``default_url``.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

SECRET = "<secret>"


@dataclass(frozen=True)
class AmFile:
    """An ``alertmanager.yml`` integration: its ``keys`` (others are unknown),
    Alertmanager's default ``send_resolved``, its Go-template ``fields``,
    ``refused`` keys (key -> why), ``http`` (takes ``http_config``),
    ``literal`` fields Alertmanager sends as written (not templates),
    ``defaults`` of the fields (config/notifiers.go) and ``merge(out, given)``
    when the file's fields are not a plain override, and
    ``read(mapping, key, ctx) -> ReceiverConfig data``, whose
    ``alertmanager_fields`` (optional) join the template fields: what
    Alertmanager renders but takes from ``global`` or a ``*_file`` (email
    ``from``, ``routing_key``, ``api_key``); ``ctx`` giving
    ``fail``, ``at``, ``url``, ``text``, ``boolean``, ``mapping``, ``own_or_global``,
    ``files.either`` and ``glob`` (:mod:`alerting.amconfig`)."""

    keys: tuple[str, ...]
    send_resolved: bool
    fields: tuple[str, ...]
    read: Callable[[dict, str, Any], dict[str, Any]]
    refused: dict[str, str] = field(default_factory=dict)
    http: bool = True
    defaults: dict[str, Any] = field(default_factory=dict)
    merge: Callable[[dict, dict], dict] | None = None
    literal: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReceiverType:
    """One receiver type (parts: module doc)."""

    name: str
    requests: Callable[..., list]
    am_requests: Callable[..., list]
    am_status: Callable[[Any], dict[str, Any]]
    check: Callable[[Any], None]
    am_kind: str
    am_file: AmFile | None
    default_url: str = ""


_TYPES: dict[str, ReceiverType] = {}
_loaded = False


def register(kind: ReceiverType) -> ReceiverType:
    """Add ``kind`` and return it.

    Raises:
        TypeError: a part is missing or of the wrong kind.
        ValueError: the name is taken.
    """
    if not isinstance(kind, ReceiverType):
        raise TypeError(f"register() takes a ReceiverType, got {type(kind).__name__}")
    if bool(kind.am_kind) != isinstance(kind.am_file, AmFile) or (
            kind.am_file is not None and not callable(kind.am_file.read)):
        raise TypeError(f"receiver type {kind.name!r}: am_file is missing or not an AmFile "
                        "(None exactly when am_kind is empty)")
    for f in fields(ReceiverType):
        if f.name == "am_file":
            continue
        value = getattr(kind, f.name)
        ok = isinstance(value, str) if f.type in ("str",) else callable(value)
        if not ok or (f.name == "name" and not value):
            raise TypeError(f"receiver type {kind.name!r}: {f.name} is missing or not a "
                            f"{'string' if f.type == 'str' else 'function'}")
    if kind.name in _TYPES and _TYPES[kind.name] is not kind:
        raise ValueError(f"receiver type {kind.name!r} is registered twice")
    _TYPES[kind.name] = kind
    return kind


def _load() -> None:
    global _loaded
    if not _loaded:
        for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
            importlib.import_module(f"{__package__}.{info.name}")
        _loaded = True


def receiver_types() -> dict[str, ReceiverType]:
    """Every registered type by name."""
    _load()
    return dict(_TYPES)


def receiver_type(name: str) -> ReceiverType:
    """The type called ``name``.

    Raises:
        ValueError: no such type.
    """
    _load()
    try:
        return _TYPES[name]
    except KeyError:
        raise ValueError(f"unknown receiver type {name!r} (known: {', '.join(sorted(_TYPES))})") from None


def needs(receiver: Any, name: str, why: str = "") -> None:
    """A ``check``: ``ValueError("<name>: required for type <t>")`` when empty."""
    if not getattr(receiver, name):
        raise ValueError(f"{name}: required for type {receiver.type}" + (f" ({why})" if why else ""))


def redacted_url(url: str) -> str:
    """``scheme://host[:port]/<secret>`` (path and query may hold a token)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{host}/{SECRET}" if parts.scheme and host else SECRET


def secret_status(receiver: Any, am_kind: str, secret: str, url_key: str = "url",
                  default_url: str | None = None) -> dict[str, Any]:
    """``{am_kind: [{secret: "<secret>", "send_resolved", url_key}]}``; the
    URL only when not ``default_url`` (None: never)."""
    own = ({url_key: redacted_url(receiver.url)}
           if default_url is not None and receiver.url != default_url else {})
    return {am_kind: [{secret: SECRET, "send_resolved": receiver.send_resolved, **own}]}


def json_request(receiver: Any, payload: Any) -> list:
    """One JSON POST of ``payload`` to the receiver's URL with its headers."""
    from alerting.receivers.request import Request, dumps
    headers = {"Content-Type": "application/json", **receiver.headers}
    return [Request(receiver.url, dumps(payload), headers)]
