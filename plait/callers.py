"""The caller registry: which business systems (``sysCode``) may use Plait, with
which credentials and within which limits; and the checks a spec must pass
before a task is accepted (docs/architecture.md, "Data flow of an export", step 2).

The registry is a YAML (``.yaml``/``.yml``) or JSON (``.json``) file loaded once
at start-up::

    callers:
      crm:                                  # the sysCode
        appKey: crm-prod
        appSecret: "<at least 32 characters>"
        bizTypes: [orders, customers]
        dataApiPrefixes: ["https://crm.internal:8443/export/"]
        fileFormats: [csv, xlsx]
        maxRows: 1000000
        maxConcurrentTasks: 4
        reuseWindowSeconds: 600
        linkTtlSeconds: 3600
        tier: gold                          # platinum | gold | standard | free
        dailyRows: 5000000                  # rows per day (optional; plait.quotas)
        timezone: Asia/Shanghai             # the caller's day for dailyRows (default UTC)
        alertIngest: true                   # may POST /alerts (signed)
        silenceManage: true                 # may POST /silences, DELETE /silences/{id} (signed)
        alertmanagerToken: "<at least 32 characters>"  # bearer token of /api/v2/... (optional)

Errors name the key (``callers.crm.maxRows: ...``) and never echo a value,
so a mistyped secret cannot end up in a start-up log.
"""
from __future__ import annotations

import hmac
import ipaddress
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import SplitResult, unquote, urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import httpx
import yaml
from pydantic import (BaseModel, ConfigDict, Field, SecretStr, ValidationError,
                      field_validator)

from plait.errors import ConfigError, FieldError
from plait.spec import ExportSpec, FileFormat

Tier = Literal["platinum", "gold", "standard", "free"]
SYS_CODE_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"
_DEFAULT_PORTS = {"http": 80, "https": 443}
#: Characters refused anywhere in a data-API URL: controls, space, backslash
#: (parsers disagree on ``\\`` - WHATWG treats it as ``/``; OWASP SSRF cheat sheet).
_BAD_URL_CHARS = re.compile(r"[\x00-\x20\x7f\\]")


class CallerConfigError(ConfigError):
    """Start-up: the registry file is missing, unreadable or invalid; the
    message names the file and the key (``callers.crm.appSecret``), never the
    value. The API does not start."""


class NotAllowed(FieldError):
    """A spec that asks for more than the caller's registry entry allows
    (raised by :func:`check_spec` on ``POST /export/tasks``, and again by the
    export worker before it starts); the API answers 422 naming the field.

    Attributes:
        field: the spec field at fault, dotted (``dataConfig.dataApiUrl``).
        rule: human-readable; ``str(error)`` starts with ``"<field>: <rule>"``.
        code: short machine-readable rule name (``allowlist``, ``scheme``...).
    """

    def __init__(self, field: str, message: str, code: str = "not allowed",
                 accepted: str | None = None) -> None:
        super().__init__(field, message, accepted, code)


class Caller(BaseModel):
    """One business system's registration.

    Attributes:
        sysCode: the caller's system code (the registry key).
        appKey: public identifier sent in ``X-Plait-AppKey``.
        appSecret: HMAC key of request signatures and data tokens (>= 32 chars);
            a ``SecretStr`` so ``repr``/``model_dump`` never show it.
        bizTypes: bizTypes this caller may export.
        dataApiPrefixes: URL prefixes ``dataConfig.dataApiUrl`` must start with
            (:func:`check_data_api_url`); empty means pull mode is refused.
        notifyUrlPrefixes: URL prefixes ``jobConfig.notifyUrl`` (completion
            webhook) must start with, same rules; empty refuses ``notifyUrl``.
        fileFormats: formats this caller may ask for.
        maxRows: cap on rows per task; ``jobConfig.maxRows`` may not exceed it.
        maxConcurrentTasks: tasks of this caller running at once.
        reuseWindowSeconds: a recent identical task (same fingerprint) younger
            than this is reused instead of run again; 0 disables reuse.
        linkTtlSeconds: lifetime of download links, seconds.
        tier: tenant tier, for scheduling priority (``plait.limits.TIER_WEIGHTS``).
        dailyRows: rows this caller may export per day, besides its concurrency
            limit (``plait.quotas``; what standard and free tiers usually get);
            None (default) is no daily quota.
        timezone: IANA zone of the caller's day: ``dailyRows`` resets at its
            local midnight; default ``UTC``.
        alertIngest: may send alerts (signed ``POST /alerts``); default False.
        silenceManage: may create and expire silences (signed ``POST /silences``,
            ``DELETE /silences/{id}``); default False.
        alertmanagerToken: bearer token this caller's Prometheus / amtool sends
            to the Alertmanager-compatible routes (``/api/v2/...``, which then
            also need ``alertIngest``); >= 32 characters, unique; a ``SecretStr``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    sysCode: str = Field(pattern=SYS_CODE_PATTERN)
    appKey: str = Field(min_length=3, max_length=128, pattern=r"^[A-Za-z0-9_.-]+$")
    appSecret: SecretStr = Field(min_length=32, max_length=512)
    bizTypes: frozenset[str] = Field(min_length=1)
    dataApiPrefixes: tuple[str, ...] = ()
    notifyUrlPrefixes: tuple[str, ...] = ()
    fileFormats: frozenset[FileFormat] = Field(min_length=1)
    maxRows: int = Field(ge=1)
    maxConcurrentTasks: int = Field(default=2, ge=1, le=1000)
    reuseWindowSeconds: int = Field(default=0, ge=0, le=7 * 24 * 3600)
    linkTtlSeconds: int = Field(default=3600, ge=60, le=7 * 24 * 3600)
    tier: Tier = "standard"
    dailyRows: int | None = Field(default=None, ge=1)
    timezone: str = "UTC"
    alertIngest: bool = False
    silenceManage: bool = False
    alertmanagerToken: SecretStr | None = Field(default=None, min_length=32, max_length=512)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, zone: str) -> str:
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError("unknown IANA time zone (e.g. UTC, Asia/Shanghai)") from None
        return zone

    @field_validator("dataApiPrefixes", "notifyUrlPrefixes")
    @classmethod
    def _prefixes_are_urls(cls, prefixes: tuple[str, ...]) -> tuple[str, ...]:
        for i, prefix in enumerate(prefixes):
            try:
                parts = _parse_http_url(prefix)
            except NotAllowed as exc:
                raise ValueError(f"item {i}: {exc.rule}") from None
            if parts.query or parts.fragment:
                raise ValueError(f"item {i}: a prefix may not have a query or fragment")
        return prefixes

    def secret(self) -> str:
        """The plain ``appSecret`` (for HMAC only; never log it)."""
        return self.appSecret.get_secret_value()


class CallerRegistry:
    """Callers indexed by ``sysCode`` and by ``appKey`` (both unique)."""

    def __init__(self, callers: Iterable[Caller]) -> None:
        self._by_sys: dict[str, Caller] = {}
        self._by_key: dict[str, Caller] = {}
        self._by_token: dict[str, Caller] = {}
        for caller in callers:
            if caller.sysCode in self._by_sys:
                raise CallerConfigError(f"callers.{caller.sysCode}: sysCode registered twice")
            other = self._by_key.get(caller.appKey)
            if other is not None:
                raise CallerConfigError(f"callers.{caller.sysCode}.appKey: same appKey as "
                                        f"callers.{other.sysCode}; appKeys must be unique")
            token = caller.alertmanagerToken.get_secret_value() if caller.alertmanagerToken else None
            if token is not None:
                if token in self._by_token:
                    raise CallerConfigError(f"callers.{caller.sysCode}.alertmanagerToken: same "
                                            f"token as callers.{self._by_token[token].sysCode}; "
                                            "tokens must be unique")
                self._by_token[token] = caller
            self._by_sys[caller.sysCode] = caller
            self._by_key[caller.appKey] = caller

    def by_sys_code(self, sys_code: str) -> Caller | None:
        """The caller registered under ``sys_code``, or None."""
        return self._by_sys.get(sys_code)

    def by_app_key(self, app_key: str) -> Caller | None:
        """The caller whose ``appKey`` is ``app_key``, or None."""
        return self._by_key.get(app_key)

    def by_bearer_token(self, token: str) -> Caller | None:
        """The caller whose ``alertmanagerToken`` is ``token`` (constant-time
        comparison against each registered token), or None."""
        found = None
        for known, caller in self._by_token.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                found = caller
        return found

    def __len__(self) -> int:
        return len(self._by_sys)

    def __iter__(self):
        return iter(self._by_sys.values())


def parse_callers(doc: Any, source: str = "callers") -> CallerRegistry:
    """Validate a parsed registry document (``{"callers": {sysCode: {...}}}``).

    Raises:
        CallerConfigError: naming ``source`` and the first bad key, e.g.
            ``callers.crm.maxRows: Input should be greater than or equal to 1``.
    """
    if not isinstance(doc, Mapping) or not isinstance(doc.get("callers"), Mapping):
        raise CallerConfigError(f"{source}: expected a mapping with a 'callers' mapping of "
                                "sysCode -> caller settings")
    extra = set(doc) - {"callers"}
    if extra:
        raise CallerConfigError(f"{source}: unknown top-level key(s) {sorted(map(str, extra))}")
    callers = []
    for sys_code, entry in doc["callers"].items():
        if not isinstance(entry, Mapping):
            raise CallerConfigError(f"{source}: callers.{sys_code}: expected a mapping")
        if "sysCode" in entry and entry["sysCode"] != sys_code:
            raise CallerConfigError(f"{source}: callers.{sys_code}.sysCode: differs from its key")
        try:
            callers.append(Caller.model_validate({**entry, "sysCode": str(sys_code)}))
        except ValidationError as exc:
            err = exc.errors()[0]  # loc + msg only: the input value may be a secret
            loc = ".".join(str(p) for p in err["loc"])
            raise CallerConfigError(f"{source}: callers.{sys_code}.{loc}: {err['msg']}") from None
    try:
        return CallerRegistry(callers)
    except CallerConfigError as exc:
        raise CallerConfigError(f"{source}: {exc}") from None


def load_callers(path: str | Path) -> CallerRegistry:
    """Read and validate the registry file at ``path`` (JSON when it ends in
    ``.json``, else YAML, parsed with ``yaml.safe_load``).

    Raises:
        CallerConfigError: file missing/unreadable, not parseable, or invalid
            (the message names the file and the key).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CallerConfigError(f"{path}: cannot read caller registry ({exc.strerror})") from None
    try:
        doc = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        where = getattr(exc, "problem_mark", None) or getattr(exc, "lineno", None)
        raise CallerConfigError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}"
                                f"{f' (near {where})' if where else ''}") from None
    return parse_callers(doc, str(path))


# -- SSRF: the data-API URL ---------------------------------------------------

def _host(parts: SplitResult) -> str:
    host = (parts.hostname or "").rstrip(".")
    try:
        host = host.encode("idna").decode("ascii") if not host.isascii() else host
    except UnicodeError:
        raise NotAllowed("dataConfig.dataApiUrl", "host name is not valid", "host") from None
    try:  # one spelling per IP address (``::0:1`` == ``::1``); odd IPv4 spellings
        host = str(ipaddress.ip_address(host))  # such as 127.1 stay as typed and match nothing
    except ValueError:
        pass
    return host.lower()


def _parse_http_url(url: str, field: str = "dataConfig.dataApiUrl") -> SplitResult:
    if not isinstance(url, str) or not url:
        raise NotAllowed(field, "must be a non-empty URL", "url")
    if _BAD_URL_CHARS.search(url):
        raise NotAllowed(field, "may not contain spaces, control characters or backslashes",
                         "characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise NotAllowed(field, "is not a valid URL (bad host or port)", "url") from None
    if parts.scheme.lower() not in _DEFAULT_PORTS:
        raise NotAllowed(field, f"scheme {parts.scheme.lower() or '(none)'!r} is not allowed; "
                                "only http and https", "scheme")
    if "@" in parts.netloc:
        raise NotAllowed(field, "may not carry credentials (user:password@); "
                                "Plait authenticates with a data token", "userinfo")
    if not parts.hostname:
        raise NotAllowed(field, "has no host", "host")
    if port == 0:
        raise NotAllowed(field, "port 0 is not allowed", "port")
    return parts


def _path_segments_ok(path: str) -> bool:
    # Dot segments (RFC 3986 s5.2.4), raw or percent-encoded, would let
    # /allowed/../admin escape a path prefix once the server normalizes it.
    decoded = unquote(unquote(path))
    return not any(seg in (".", "..") for seg in decoded.replace("\\", "/").split("/"))


def _same_in_httpx(url: str, host: str, port: int, field: str) -> None:
    # Parser differentials are the classic SSRF bypass (OWASP; Orange Tsai, "A New Era
    # of SSRF"): the fetcher's own parser must see the host and port we checked.
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError):
        raise NotAllowed(field, "is not a URL the fetcher can use", "url") from None
    their_host = parsed.host.rstrip(".").lower()
    try:
        their_host = str(ipaddress.ip_address(their_host))
    except ValueError:
        pass
    if (their_host, parsed.port or _DEFAULT_PORTS.get(parsed.scheme, 0)) != (host, port):
        raise NotAllowed(field, "is ambiguous (URL parsers disagree on its host)", "url")


def check_data_api_url(url: str, allowed_prefixes: Iterable[str],
                       field: str = "dataConfig.dataApiUrl") -> None:
    """Refuse a ``dataApiUrl`` that could make Plait call something it should not
    (server-side request forgery; OWASP SSRF Prevention Cheat Sheet, "allow list"
    approach for calls to known, trusted applications).

    Rules: scheme ``http``/``https`` only; no ``user:password@``; no spaces,
    control characters or backslashes; no ``.``/``..`` path segments (also
    percent-encoded); and the URL must match one of ``allowed_prefixes`` by
    parsed parts: same scheme, same host (case-insensitive, IDNA, trailing dot
    ignored), same port (default 80/443 when absent) and a path that equals the
    prefix's path or continues it at a ``/`` boundary. So
    ``http://good.example.com.evil.net/`` does not match prefix
    ``http://good.example.com``, nor ``http://good.example.com:6379/``, nor
    ``/exporter`` for prefix ``/export``. No prefixes means nothing is allowed.

    Redirects are a separate rule: the fetcher must not follow them.

    Raises:
        NotAllowed: with ``field`` (default ``dataConfig.dataApiUrl``; also
            used for ``jobConfig.notifyUrl``) and the rule broken.
    """
    parts = _parse_http_url(url, field)
    if not _path_segments_ok(parts.path):
        raise NotAllowed(field, "may not contain '.' or '..' path segments", "path")
    scheme, host = parts.scheme.lower(), _host(parts)
    port = parts.port or _DEFAULT_PORTS[scheme]
    path = parts.path or "/"
    _same_in_httpx(url, host, port, field)
    for prefix in allowed_prefixes:
        try:
            p = _parse_http_url(prefix, "prefix")
        except NotAllowed:
            continue
        p_scheme = p.scheme.lower()
        if (scheme, host, port) != (p_scheme, _host(p), p.port or _DEFAULT_PORTS[p_scheme]):
            continue
        p_path = p.path or "/"
        if path == p_path or path.startswith(p_path if p_path.endswith("/") else p_path + "/"):
            return
    what = "data-API URL" if field == "dataConfig.dataApiUrl" else "notify URL"
    raise NotAllowed(field, f"is not under any {what} prefix allowed for this caller",
                     "allowlist")


# -- the spec -----------------------------------------------------------------

def check_spec(caller: Caller, spec: ExportSpec) -> None:
    """Check ``spec`` against what ``caller`` may do; returns None when allowed.

    Checks, in order: ``sysCode`` is the caller's own; ``bizType`` in
    ``caller.bizTypes``; ``documentConfig.fileFormat`` in ``caller.fileFormats``;
    in pull mode ``dataConfig.dataApiUrl`` passes :func:`check_data_api_url`
    with ``caller.dataApiPrefixes``; ``jobConfig.maxRows`` (when given) is at
    most ``caller.maxRows`` (when absent, admission applies the cap:
    :func:`effective_max_rows`).

    Raises:
        NotAllowed: naming the field (``bizType``, ``documentConfig.fileFormat``,
            ``dataConfig.dataApiUrl``, ``jobConfig.maxRows``, ``sysCode``).
    """
    if spec.sysCode != caller.sysCode:
        raise NotAllowed("sysCode", "is not the sysCode of the authenticated caller", "owner")
    if spec.bizType not in caller.bizTypes:
        raise NotAllowed("bizType", f"{spec.bizType!r} is not allowed for this caller "
                                    f"(allowed: {', '.join(sorted(caller.bizTypes))})", "allowlist")
    fmt = spec.documentConfig.fileFormat
    if fmt not in caller.fileFormats:
        raise NotAllowed("documentConfig.fileFormat", f"{fmt!r} is not allowed for this caller "
                         f"(allowed: {', '.join(sorted(caller.fileFormats))})", "allowlist")
    if spec.dataConfig.mode == "pull":
        check_data_api_url(spec.dataConfig.dataApiUrl or "", caller.dataApiPrefixes)
    if spec.jobConfig.notifyUrl:
        check_data_api_url(spec.jobConfig.notifyUrl, caller.notifyUrlPrefixes,
                           "jobConfig.notifyUrl")
    asked = spec.jobConfig.maxRows
    if asked is not None and asked > caller.maxRows:
        raise NotAllowed("jobConfig.maxRows", f"{asked:,} is over this caller's cap of "
                                              f"{caller.maxRows:,} rows", "max")


def effective_max_rows(caller: Caller, spec: ExportSpec) -> int:
    """The row cap a task runs with: ``jobConfig.maxRows`` if given, else the
    caller's ``maxRows`` (never more than the caller's cap)."""
    asked = spec.jobConfig.maxRows
    return caller.maxRows if asked is None else min(asked, caller.maxRows)


def limits_by_sys_code(registry: CallerRegistry) -> dict[str, dict[str, Any]]:
    """Per-caller concurrency and tier as ``{sysCode: {"maxConcurrent": n,
    "tier": t}}``, the shape of ``Limits.sysCodes`` in ``plait.limits``, so
    admission can take both from the one registry file."""
    return {c.sysCode: {"maxConcurrent": c.maxConcurrentTasks, "tier": c.tier} for c in registry}
