"""The caller registry (``PLAIT_CALLERS_FILE``, YAML or JSON, read at start-up; example:
examples/callers.yaml) and the checks a spec must pass before a task is accepted
(docs/architecture.md, "Data flow of an export"). Errors name the key, never a value."""
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
#: Refused anywhere in a URL; parsers disagree on a backslash (WHATWG: ``/``).
_BAD_URL_CHARS = re.compile(r"[\x00-\x20\x7f\\]")


class CallerConfigError(ConfigError):
    """Start-up: the registry file is missing, unreadable or invalid (names file and key)."""


class NotAllowed(FieldError):
    """A spec asking for more than the caller's entry allows (422 naming the field;
    :func:`check_spec`)."""

    def __init__(self, field: str, message: str, code: str = "not allowed",
                 accepted: str | None = None) -> None:
        super().__init__(field, message, accepted, code)


class Caller(BaseModel):
    """One business system's registration; each field's ``description`` says what it allows."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    sysCode: str = Field(pattern=SYS_CODE_PATTERN)
    appKey: str = Field(min_length=3, max_length=128, pattern=r"^[A-Za-z0-9_.-]+$",
                        description="public identifier sent in X-Plait-AppKey")
    appSecret: SecretStr = Field(min_length=32, max_length=512, description=(
        "HMAC key of request signatures and data tokens"))
    bizTypes: frozenset[str] = Field(min_length=1)
    dataApiPrefixes: tuple[str, ...] = Field(default=(), description=(
        "URL prefixes dataConfig.dataApiUrl must start with; empty refuses pull mode"))
    notifyUrlPrefixes: tuple[str, ...] = Field(default=(), description=(
        "URL prefixes jobConfig.notifyUrl must start with; empty refuses notifyUrl"))
    fileFormats: frozenset[FileFormat] = Field(min_length=1)
    maxRows: int = Field(ge=1, description="cap on rows per task")
    maxConcurrentTasks: int = Field(default=2, ge=1, le=1000)
    reuseWindowSeconds: int = Field(default=0, ge=0, le=7 * 24 * 3600, description=(
        "an identical task younger than this is reused; 0: never"))
    linkTtlSeconds: int = Field(default=3600, ge=60, le=7 * 24 * 3600)
    tier: Tier = "standard"
    dailyRows: int | None = Field(default=None, ge=1, description=(
        "rows this caller may export per day (plait.quotas); None: no quota"))
    timezone: str = Field(default="UTC", description="IANA zone of the day dailyRows counts")
    alertIngest: bool = Field(default=False, description="may send alerts (POST /alerts)")
    silenceManage: bool = Field(default=False, description=(
        "may create and expire silences (POST /silences, DELETE /silences/{id})"))
    alertmanagerToken: SecretStr | None = Field(default=None, min_length=32, max_length=512,
                                                description=(
        "unique bearer token of the /api/v2 routes (which also need alertIngest)"))

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
        return self._by_sys.get(sys_code)

    def by_app_key(self, app_key: str) -> Caller | None:
        return self._by_key.get(app_key)

    def by_bearer_token(self, token: str) -> Caller | None:
        """The caller whose ``alertmanagerToken`` is ``token`` (constant-time), or None."""
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
    """Validate a parsed registry document (``{"callers": {sysCode: {...}}}``). Raises
    CallerConfigError naming ``source`` and the first bad key."""
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
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"])
            raise CallerConfigError(f"{source}: callers.{sys_code}.{loc}: {err['msg']}") from None
    try:
        return CallerRegistry(callers)
    except CallerConfigError as exc:
        raise CallerConfigError(f"{source}: {exc}") from None


def load_callers(path: str | Path) -> CallerRegistry:
    """Read and validate the registry at ``path`` (``.json``: JSON, else YAML). Raises
    CallerConfigError."""
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
    # Dot segments (RFC 3986 s5.2.4), even encoded, escape a path prefix.
    decoded = unquote(unquote(path))
    return not any(seg in (".", "..") for seg in decoded.replace("\\", "/").split("/"))


def _same_in_httpx(url: str, host: str, port: int, field: str) -> None:
    # Parser differentials bypass SSRF checks (OWASP): httpx must see the same host and port.
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
    """Raises NotAllowed (with ``field``) for a URL Plait must not call (SSRF; OWASP SSRF Prevention
    Cheat Sheet, allow-list approach).

    Rules: ``http``/``https`` only; no userinfo, spaces, control characters, backslashes, or
    ``.``/``..`` segments (also percent-encoded); the URL must match one of ``allowed_prefixes`` by
    parsed parts: scheme, host (case-insensitive, IDNA, trailing dot ignored), port (80/443 when
    absent), and a path equal to the prefix's or continuing it at a ``/``. No prefixes allows
    nothing. The fetcher must not follow redirects."""
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


def check_spec(caller: Caller, spec: ExportSpec) -> None:
    """Raises NotAllowed naming the first field of ``spec`` beyond ``caller``'s allowances (sysCode,
    bizType, fileFormat, dataApiUrl, notifyUrl, maxRows)."""
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
    """The row cap a task runs with: ``jobConfig.maxRows``, at most the caller's ``maxRows``."""
    asked = spec.jobConfig.maxRows
    return caller.maxRows if asked is None else min(asked, caller.maxRows)


def limits_by_sys_code(registry: CallerRegistry) -> dict[str, dict[str, Any]]:
    """``{sysCode: {"maxConcurrent", "tier"}}``, the shape of ``Limits.sysCodes``."""
    return {c.sysCode: {"maxConcurrent": c.maxConcurrentTasks, "tier": c.tier} for c in registry}
