"""Alertmanager's ``alertmanager.yml``, read as it is and translated into
:class:`~alerting.config.AlertingConfig` (docs/alerting.md, "Bring your alertmanager.yml"; keys and
words from Alertmanager's ``config/config.go`` and ``config/notifiers.go``).

What Plait cannot do is refused at load naming the key; what ``amtool check-config`` refuses is
refused in Alertmanager's words (``route.routes.0.receiver: undefined receiver "x" used in
route``). A receiver of several integrations is one Plait receiver each (``<name>``, ``<name>.1``;
``AlertingConfig.fanout``). Plait's own settings are a top-level ``plait:`` block (or
``PLAIT_ALERTMANAGER_EXTRAS``); without it the file behaves as in Alertmanager.
"""
from __future__ import annotations

import base64
import binascii
import re
from pathlib import Path
from typing import Any, Callable

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from alerting import goglob, gourl
from alerting.config import (AlertingConfig, BucketConfig, DedupeConfig, DeliveryConfig,
                             NormalizeConfig, RulesConfig, Seconds, TemplatesConfig, TimeInterval,
                             check_group_by, format_errors, parse_config)
from alerting.matchers import MatchOp, parse_matcher, parse_matchers
from alerting.receivers.alertmanager import with_defaults
from alerting.receivers.registry import receiver_types
from plait.errors import ConfigError

#: A receiver's token bucket when ``plait:`` sets none: never empty.
UNLIMITED = {"burst": 1_000_000_000, "refill_interval": 0.001}
#: Most alerts in one message without ``plait.grouping.batch_size`` (bounds a Kafka record).
MAX_BATCH = 10_000

#: Integrations of one receiver in this order (the first keeps its name); others after.
_ORDER = ("webhook_configs", "slack_configs", "pagerduty_configs", "opsgenie_configs",
          "email_configs", "msteams_configs")
_TYPES = {t.am_kind: t for t in receiver_types().values() if t.am_kind}
_TYPES = {k: _TYPES[k] for k in [*(k for k in _ORDER if k in _TYPES), *sorted(set(_TYPES) - set(_ORDER))]}
#: ``*_configs`` Plait delivers -> its receiver type.
KINDS = {kind: t.name for kind, t in _TYPES.items()}
#: Alertmanager's other integrations (refused: Plait has no such receiver).
OTHER_KINDS = ("discord_configs", "pushover_configs", "victorops_configs", "wechat_configs",
               "sns_configs", "telegram_configs", "webex_configs", "msteamsv2_configs",
               "jira_configs", "rocketchat_configs", "mattermost_configs", "incidentio_configs")
TOP_KEYS = ("global", "route", "inhibit_rules", "receivers", "templates", "mute_time_intervals",
            "time_intervals", "tracing", "event_recorder")
GLOBAL_KEYS = (
    "resolve_timeout", "http_config", "jira_api_url", "smtp_from", "smtp_hello", "smtp_smarthost",
    "smtp_auth_username", "smtp_auth_password", "smtp_auth_password_file", "smtp_auth_secret",
    "smtp_auth_secret_file", "smtp_auth_identity", "smtp_require_tls", "smtp_tls_config",
    "smtp_force_implicit_tls", "slack_api_url", "slack_api_url_file", "slack_app_token",
    "slack_app_token_file", "slack_app_url", "pagerduty_url", "opsgenie_api_url",
    "opsgenie_api_key", "opsgenie_api_key_file", "wechat_api_url", "wechat_api_secret",
    "wechat_api_secret_file", "wechat_api_corp_id", "victorops_api_url", "victorops_api_key",
    "victorops_api_key_file", "telegram_api_url", "telegram_bot_token", "telegram_bot_token_file",
    "webex_api_url", "rocketchat_api_url", "rocketchat_token", "rocketchat_token_file",
    "rocketchat_token_id", "rocketchat_token_id_file", "mattermost_webhook_url",
    "mattermost_webhook_url_file")
ROUTE_KEYS = ("receiver", "group_by", "match", "match_re", "matchers", "mute_time_intervals",
              "active_time_intervals", "continue", "routes", "group_wait", "group_interval",
              "repeat_interval")
INHIBIT_KEYS = ("source_match", "source_match_re", "source_matchers", "target_match",
                "target_match_re", "target_matchers", "equal")
HTTP_KEYS = ("basic_auth", "authorization", "bearer_token", "bearer_token_file", "tls_config",
             "proxy_url", "no_proxy", "proxy_from_environment", "proxy_connect_header",
             "follow_redirects", "enable_http2", "oauth2", "http_headers")
#: http_config keys Plait's sender does not apply (refused when set).
HTTP_UNSUPPORTED = ("proxy_url", "no_proxy", "proxy_from_environment", "proxy_connect_header",
                    "oauth2", "http_headers")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_PROM_DURATION = re.compile(r"^(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?"
                            r"(?:(\d+)ms)?$")
_DURATION_UNITS = (365 * 86400, 7 * 86400, 86400, 3600, 60, 1, 0.001)


def _fail(key: str, problem: str) -> ConfigError:
    return ConfigError(f"{key}: {problem}" if key else problem)


def _at(key: str, name: Any) -> str:
    return f"{key}.{name}" if key else str(name)


def _mapping(value: Any, key: str, allowed: tuple[str, ...], what: str) -> dict[str, Any]:
    """``value`` as a mapping whose keys are all in ``allowed`` (Go's ``UnmarshalStrict``: ``field
    x not found in type ...``); null is ``{}``."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _fail(key or "(top level)", f"expected a mapping, got {type(value).__name__}")
    for name in value:
        if name not in allowed:
            raise _fail(_at(key, name), f"field {name} not found in type {what} "
                                        "(Alertmanager's configuration has no such key)")
    return value


def _list(value: Any, key: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _fail(key, f"expected a list, got {type(value).__name__}")
    return value


def _text(value: Any, key: str) -> str:
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        raise _fail(key, f"expected a string, got {type(value).__name__}")
    return str(value)


def duration(value: Any, key: str) -> float:
    """Seconds of a Prometheus duration (``30s``, ``1h30m``, ``0``). Raises ConfigError naming
    ``key``."""
    text = _text(value, key)
    m = _PROM_DURATION.match(text) if text and text != "0" else None
    if text == "0":
        return 0.0
    if not m or not any(m.groups()):
        raise _fail(key, f'not a valid duration string: "{text}"')
    seconds = float(sum(int(g) * u for g, u in zip(m.groups(), _DURATION_UNITS) if g))
    if seconds > _MAX_DURATION:
        raise _fail(key, "duration out of range")
    return seconds


#: Longest duration Alertmanager takes: Go's ``time.Duration``, int64 nanoseconds (~292 years).
_MAX_DURATION = (2**63 - 1) / 1e9


def http_url(value: Any, key: str) -> str:
    """An absolute http(s) URL, taken as written (Alertmanager's ``parseURL``: Go's
    ``url.Parse`` (:func:`alerting.gourl.parse`), then a scheme other than http(s) or no host
    is an error). No trimming."""
    text = _text(value, key)
    try:
        scheme, host = gourl.parse(text)
    except ValueError as e:
        raise _fail(key, f"parse {gourl.quote(text)}: {e}") from None
    if scheme not in ("http", "https"):
        raise _fail(key, f'unsupported scheme "{scheme}" for URL')
    if not host:
        raise _fail(key, "missing host for URL")
    return text


class _File:
    """Reads the ``*_file`` secrets and globs of one configuration file, relative to its directory
    (Alertmanager's ``resolveFilepaths``)."""

    def __init__(self, base: Path) -> None:
        self.base = base

    def path(self, name: str) -> Path:
        p = Path(name)
        return p if p.is_absolute() else self.base / p

    def secret(self, name: Any, key: str) -> str:
        try:
            return self.path(_text(name, key)).read_text(encoding="utf-8").strip()
        except OSError as e:
            raise _fail(key, f"cannot read {name}: {e.strerror or e}") from None

    def either(self, c: dict, inline: str, file: str, key: str, default: str = "") -> str:
        """The value of ``inline`` or the content of ``file`` (at most one of them, Alertmanager's
        words), else ``default``."""
        if c.get(inline) not in (None, "") and c.get(file) not in (None, ""):
            raise _fail(_at(key, file), f"at most one of {inline} & {file} must be configured")
        if c.get(file) not in (None, ""):
            return self.secret(c[file], _at(key, file))
        return _text(c.get(inline), _at(key, inline)) or default


# -- YAML ------------------------------------------------------------------------------------

class _StrictLoader(yaml.SafeLoader):
    """YAML as Go's ``yaml.UnmarshalStrict`` (gopkg.in/yaml.v2) fills Alertmanager's structs:

    - a key twice in one mapping is refused (``mapping key "x" already defined``);
    - a plain scalar read into a string field is its text: ``paging: yes``, ``v: 1.10``,
      ``code: 010``, ``start_time: 09:00`` and ``days_of_month: [1, 15]`` hold ``"yes"``,
      ``"1.10"``, ``"010"``, ``"09:00"`` and ``["1", "15"]``, where YAML 1.1 would read a bool,
      1.1, 8, 540 and integers. Only the bool and integer fields of Alertmanager's config
      (:data:`TYPED_KEYS`, not keys of its maps of strings, :data:`FREE_MAPS`) and Plait's own
      ``plait:`` block take YAML 1.1's types.
    """

    #: True while the value being built takes YAML 1.1's types
    typed = False
    #: how the mapping being built reads its keys: "config" (:data:`TYPED_KEYS` typed), "free"
    #: (a map of strings: no key typed) or "native" (the ``plait:`` block: everything typed)
    mode = "config"

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        """As PyYAML's, but a node is built again at each use: an alias takes the types of the
        place it stands in (``send_resolved: &a true`` then ``match: {x: *a}`` is ``"true"``
        there; a route merged into a ``match`` map gives text), as yaml.v2 decodes an alias into
        each target anew."""
        if node not in self.recursive_objects:
            self.constructed_objects.pop(node, None)
        return super().construct_object(node, deep)


#: Alertmanager 0.25's bool and integer fields (config/notifiers.go, config/config.go,
#: prometheus/common's http_config and tls_config); every other scalar it reads is a string.
TYPED_KEYS = frozenset({
    "send_resolved", "continue", "require_tls", "smtp_require_tls", "short", "short_fields",
    "link_names", "update_alerts", "disable_notifications", "max_alerts", "chat_id",
    "follow_redirects", "enable_http2", "insecure_skip_verify", "proxy_from_environment"})
#: Alertmanager's ``map[string]string`` fields: their keys are names (a label ``continue``),
#: their values text.
FREE_MAPS = frozenset({"match", "match_re", "source_match", "source_match_re", "target_match",
                       "target_match_re", "details", "headers", "custom_fields", "attributes"})


def _yaml_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict:
    """A mapping: keys are text (a receiver ``on``, a label ``123``), a key twice refused, values
    typed as :class:`_StrictLoader` says."""
    outer, out = (loader.typed, loader.mode), {}
    try:
        loader.typed = False
        seen: set = set()
        for key_node, _value in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = loader.construct_object(key_node, deep=True)
            if key in seen:
                raise ConfigError(f"line {key_node.start_mark.line + 1}: field {key} already set "
                                  "(a key given twice in one mapping)")
            seen.add(key)
        for key_node, value_node in node.value:
            loader.typed, loader.mode = outer
            if key_node.tag == "tag:yaml.org,2002:merge":
                merged = loader.construct_object(value_node, deep=True)
                # yaml.v2 decodes a list of merged mappings last to first: earlier ones win
                for part in reversed(merged) if isinstance(merged, list) else [merged]:
                    if not isinstance(part, dict):
                        raise ConfigError(f"line {value_node.start_mark.line + 1}: map merge "
                                          "requires map or sequence of maps as the value")
                    for key, value in part.items():
                        _decode_into(out, key, value, outer[1], value_node)
                continue
            loader.typed = False
            key = loader.construct_object(key_node, deep=True)
            loader.typed = outer[0]
            if outer[1] == "config" and isinstance(key, str):
                loader.mode = ("native" if key == "plait" else "free" if key in FREE_MAPS
                               else "config")
                loader.typed = loader.mode == "native" or key in TYPED_KEYS
            _decode_into(out, key, loader.construct_object(value_node, deep=True), outer[1],
                         key_node)
    finally:
        loader.typed, loader.mode = outer
    return out


#: Alertmanager's ``Matchers`` fields: their ``UnmarshalYAML`` appends to what is there.
MATCHER_LISTS = frozenset({"matchers", "source_matchers", "target_matchers"})


def _decode_into(out: dict, key: Any, value: Any, mode: str, node: yaml.Node) -> None:
    """Set ``out[key]`` as yaml.v2 decodes into a value already set by a merge key (``<<``) or
    set before one, in document order: a ``Matchers`` list appends, a ``map[string]string``
    (:data:`FREE_MAPS`) takes the new keys, a key twice in such a map is refused (strict
    ``key "k" already set in map``; ConfigError naming ``node``'s line), anything else is
    replaced."""
    old = out.get(key)
    again = key if mode == "free" and key in out else None
    if mode == "config" and key in FREE_MAPS and isinstance(old, dict) \
            and isinstance(value, dict):
        again = next((k for k in value if k in old), None)
        value = {**old, **value}
    elif mode == "config" and key in MATCHER_LISTS and isinstance(old, list) \
            and isinstance(value, list):
        value = old + value
    if again is not None:
        raise ConfigError(f"line {node.start_mark.line + 1}: key {gourl.quote(str(again))} "
                          "already set in map")
    out[key] = value


#: Plain scalars yaml.v2 reads as booleans that YAML 1.1's resolver in PyYAML leaves as text
_GO_BOOLS = {"y": True, "Y": True, "n": False, "N": False}


def _str_or_go_bool(loader: _StrictLoader, node: yaml.ScalarNode) -> Any:
    text = loader.construct_scalar(node)
    if loader.typed and node.style is None and text in _GO_BOOLS:
        return _GO_BOOLS[text]
    return text


def _text_unless_typed(construct: Any) -> Any:
    def build(loader: _StrictLoader, node: yaml.ScalarNode) -> Any:
        return construct(loader, node) if loader.typed else loader.construct_scalar(node)
    return build


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _yaml_mapping)
for _tag, _construct in (("bool", yaml.SafeLoader.construct_yaml_bool),
                         ("int", yaml.SafeLoader.construct_yaml_int),
                         ("float", yaml.SafeLoader.construct_yaml_float),
                         ("timestamp", yaml.SafeLoader.construct_yaml_timestamp)):
    _StrictLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _text_unless_typed(_construct))
_StrictLoader.add_constructor("tag:yaml.org,2002:str", _str_or_go_bool)


def _binary_text(loader: _StrictLoader, node: yaml.ScalarNode) -> str:
    """A ``!!binary`` scalar as the text of its bytes, as yaml.v2 decodes it into a string
    field. ConfigError when they are not UTF-8."""
    text = loader.construct_scalar(node).replace("\n", "").replace("\r", "")
    try:  # Go's base64.StdEncoding: newlines skipped, nothing else outside the alphabet
        data = binascii.a2b_base64(text.encode("ascii"), strict_mode=True)
    except (binascii.Error, UnicodeEncodeError):
        raise ConfigError(f"line {node.start_mark.line + 1}: !!binary value contains invalid "
                          "base64 data") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"line {node.start_mark.line + 1}: a !!binary value that is not "
                          "UTF-8 text") from None


_StrictLoader.add_constructor("tag:yaml.org,2002:binary", _binary_text)


def read_yaml(path: str | Path) -> Any:
    """The first YAML document of ``path`` (no duplicate keys), as gopkg.in/yaml.v2's
    ``Unmarshal`` reads one; None for an empty file. Raises ConfigError naming the file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        return next(yaml.load_all(text, Loader=_StrictLoader), None)  # noqa: S506 - SafeLoader
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: invalid YAML: {e}") from None


# -- matchers, routes, inhibition, time intervals ------------------------------------------------

def _legacy(value: Any, key: str, op: MatchOp) -> list[str]:
    """``match`` (``op`` ``=``) or ``match_re`` (``=~``) as matcher texts; label names as
    Alertmanager's ``LabelNameRE`` wants them."""
    out = []
    for name, v in _mapping(value, key, tuple(value or ()), "map").items():
        if not isinstance(name, str) or not _LABEL_NAME.match(name):
            raise _fail(_at(key, name), f'invalid label name "{name}"')
        if v is None and op is MatchOp.REGEX:  # Alertmanager's MatchRegexps.UnmarshalYAML
            raise _fail(_at(key, name), f'invalid regexp value for "{name}"')
        try:
            out.append(str(parse_matcher({"name": name, "op": op, "value": _text(v, _at(key, name))})))
        except ValueError as e:
            raise _fail(_at(key, name), str(e)) from None
    return out


def matchers(c: dict, key: str, prefix: str = "") -> list[str]:
    """``<prefix>match``, ``<prefix>match_re`` and ``<prefix>matchers`` of ``c`` as canonical texts."""
    out = _legacy(c.get(f"{prefix}match"), _at(key, f"{prefix}match"), MatchOp.EQUAL)
    out += _legacy(c.get(f"{prefix}match_re"), _at(key, f"{prefix}match_re"), MatchOp.REGEX)
    name = f"{prefix}matchers"
    for i, text in enumerate(_list(c.get(name), _at(key, name))):
        try:
            out += [str(m) for m in parse_matchers(_text(text, _at(key, f"{name}.{i}")))]
        except ValueError as e:
            raise _fail(_at(key, f"{name}.{i}"), str(e)) from None
    return out


def _timers(c: dict, key: str) -> dict[str, float]:
    """The route's own timers (seconds); zero intervals refused as Alertmanager does."""
    out = {}
    for name in ("group_wait", "group_interval", "repeat_interval"):
        if c.get(name) is not None:
            out[name] = duration(c[name], _at(key, name))
            if name != "group_wait" and out[name] == 0:
                raise _fail(_at(key, name), f"{name} cannot be zero")
    return out


def _group_by(c: dict, key: str) -> list[str] | None:
    """``group_by`` of route ``c``; None when absent or empty: an empty list leaves Alertmanager's
    ``Route.GroupBy`` nil (config.go ``Route.UnmarshalYAML`` appends each name), so the route
    inherits its parent's (dispatch/route.go ``NewRoute``)."""
    if not c.get("group_by"):
        _list(c.get("group_by"), _at(key, "group_by"))  # "" or 0 is still not a list
        return None
    names = [_text(n, _at(key, f"group_by.{i}")) for i, n in
             enumerate(_list(c["group_by"], _at(key, "group_by")))]
    if "" in names:  # Alertmanager's Route.UnmarshalYAML (0.28: any other UTF-8); null is ""
        raise _fail(_at(key, "group_by"), 'invalid label name "" in group_by list')
    try:
        return check_group_by(names)
    except ValueError as e:
        raise _fail(_at(key, "group_by"), str(e)) from None


def _route(c: Any, key: str, ctx: "_Context") -> dict[str, Any]:
    """One sub-route as :class:`alerting.config.SubRoute` data. A null route is refused
    (Alertmanager's loader crashes on one)."""
    if c is None:
        raise _fail(key, "expected a route, got null")
    c = _mapping(c, key, ROUTE_KEYS, "config.plain (route)")
    out: dict[str, Any] = {"matchers": matchers(c, key), **_timers(c, key)}
    if c.get("receiver"):
        out["receiver"] = ctx.receiver(_text(c["receiver"], _at(key, "receiver")), _at(key, "receiver"))
    group_by = _group_by(c, key)
    if group_by is not None:
        out["group_by"] = group_by
    if c.get("continue") is not None:
        out["continue"] = _bool(c["continue"], _at(key, "continue"))
    for name in ("mute_time_intervals", "active_time_intervals"):
        out[name] = [ctx.interval(_text(n, _at(key, f"{name}.{i}")), _at(key, f"{name}.{i}"))
                     for i, n in enumerate(_list(c.get(name), _at(key, name)))]
    out["routes"] = [_route(r, _at(key, f"routes.{i}"), ctx)
                     for i, r in enumerate(_list(c.get("routes"), _at(key, "routes")))]
    return out


def _bool(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise _fail(key, f"expected true or false, got {value!r}")
    return value


def _root(c: Any, ctx: "_Context") -> tuple[dict, dict, list[str]]:
    """(``route`` data, its timers, its ``group_by``) of the root route, with Alertmanager's rules
    for the root."""
    if c is None:
        raise _fail("route", "no route provided in config")
    c = _mapping(c, "route", ROUTE_KEYS, "config.plain (route)")
    if not c.get("receiver"):
        raise _fail("route.receiver", "root route must specify a default receiver")
    for name in ("match", "match_re", "matchers"):
        if c.get(name):
            raise _fail(f"route.{name}", "root route must not have any matchers")
    for name, what in (("mute_time_intervals", "mute"), ("active_time_intervals", "active")):
        if c.get(name):
            raise _fail(f"route.{name}", f"root route must not have any {what} time intervals")
    if c.get("continue"):
        raise _fail("route.continue", "cannot have continue in root route")
    receiver = ctx.receiver(_text(c["receiver"], "route.receiver"), "route.receiver")
    routes = [_route(r, f"route.routes.{i}", ctx)
              for i, r in enumerate(_list(c.get("routes"), "route.routes"))]
    return {"receiver": receiver, "routes": routes}, _timers(c, "route"), _group_by(c, "route") or []


def _inhibit_rules(rules: Any) -> list[dict[str, Any]]:
    out = []
    for i, r in enumerate(_list(rules, "inhibit_rules")):
        key = f"inhibit_rules.{i}"
        r = _mapping(r, key, INHIBIT_KEYS, "config.plain (inhibit_rule)")
        equal = [_text(n, f"{key}.equal.{j}") for j, n in enumerate(_list(r.get("equal"), f"{key}.equal"))]
        rule = {"equal": equal}
        for side in ("source", "target"):
            rule[f"{side}_matchers"] = matchers(r, key, f"{side}_")
        if not rule["source_matchers"] and not rule["target_matchers"]:
            # Alertmanager: every alert is then a source and a target, and a source that is
            # also a target never inhibits (inhibit.go hasEqual, excludeTwoSidedMatch): the rule
            # mutes nothing (inhibit_test.go TestEmptyInhibitionRule, an empty ``-`` item)
            continue
        for side in ("source", "target"):
            if not rule[f"{side}_matchers"]:  # Alertmanager: every alert; Plait refuses that
                raise _fail(f"{key}.{side}_matchers", f"not supported: a rule without {side} "
                            f"matchers ({side}_matchers, {side}_match or {side}_match_re) "
                            "would take every alert as its " + side)
        out.append(rule)
    return out


def _time_intervals(data: dict) -> list[dict[str, Any]]:
    """``mute_time_intervals`` then ``time_intervals``, one name space (a name twice is refused,
    Alertmanager's words)."""
    out, seen = [], set()
    for top, what in (("mute_time_intervals", "mute time interval"), ("time_intervals", "time interval")):
        for i, ti in enumerate(_list(data.get(top), top)):
            key = f"{top}.{i}"
            ti = _mapping(ti, key, ("name", "time_intervals"), f"config.plain ({what})")
            name = _text(ti.get("name"), f"{key}.name")
            if not name:
                raise _fail(f"{key}.name", f"missing name in {what}")
            if name in seen:
                raise _fail(f"{key}.name", f'{what} "{name}" is not unique')
            seen.add(name)
            items = []
            for j, item in enumerate(_list(ti.get("time_intervals"), f"{key}.time_intervals")):
                items.append(validated(TimeInterval, item, f"{key}.time_intervals.{j}"))
            out.append({"name": name, "time_intervals": items})
    return out


def validated(model: type[BaseModel], data: Any, key: str) -> dict[str, Any]:
    """``data`` checked by the pydantic ``model``; errors named under ``key``."""
    try:
        return model.model_validate(data if data is not None else {}).model_dump(by_alias=True)
    except ValidationError as e:
        raise ConfigError(format_errors(e, key)) from None


# -- receivers ---------------------------------------------------------------------------------

class _Context:
    """One file's names (references are checked against them), ``global``, ``files`` and the
    helpers a receiver type's ``AmFile.read`` uses."""

    def __init__(self, data: dict, files: _File) -> None:
        self.files = files
        self.glob = _mapping(data.get("global"), "global", GLOBAL_KEYS, "config.plain (global)")
        self.receivers = [r.get("name") for r in _list(data.get("receivers"), "receivers")
                          if isinstance(r, dict)]
        self.intervals = [t.get("name") for top in ("mute_time_intervals", "time_intervals")
                          for t in _list(data.get(top), top) if isinstance(t, dict)]

    def receiver(self, name: str, key: str) -> str:
        if name not in self.receivers:
            raise _fail(key, f'undefined receiver "{name}" used in route')
        return name

    def interval(self, name: str, key: str) -> str:
        if name not in self.intervals:
            raise _fail(key, f'undefined time interval "{name}" used in route')
        return name

    fail = staticmethod(_fail)  # (key, problem) -> ConfigError
    at = staticmethod(_at)  # (key, name) -> "key.name"
    url = staticmethod(http_url)
    text = staticmethod(_text)
    boolean = staticmethod(_bool)
    mapping = staticmethod(_mapping)  # (value, key, allowed keys, Go type) -> dict
    duration = staticmethod(duration)  # (value, key) -> seconds

    def own_or_global(self, c: dict, name: str, key: str, global_name: str, what: str) -> str:
        """``name`` (or ``<name>_file``), else ``global.<global_name>`` (or its ``_file``); raises
        ConfigError (Alertmanager's words) for neither."""
        value = self.files.either(c, name, f"{name}_file", key)
        value = value or self.files.either(self.glob, global_name, f"{global_name}_file", "global")
        if not value:
            raise _fail(_at(key, name), f"no global {what} set either inline or in a file")
        return value


#: tls_config keys Plait applies (files relative to the config file's directory)
TLS_FILES = ("ca_file", "cert_file", "key_file")
TLS_KEYS = ("ca", "ca_file", "ca_ref", "cert", "cert_file", "cert_ref", "key", "key_file",
            "key_ref", "server_name", "insecure_skip_verify", "min_version", "max_version")


def _tls(c: Any, key: str, files: _File) -> dict[str, Any] | None:
    """``tls_config`` as :class:`alerting.config.TlsConfig` data (None: unset); others refused."""
    tls = _mapping(c, key, TLS_KEYS, "config.TLSConfig")
    out: dict[str, Any] = {}
    for name, value in tls.items():
        if value in (None, "", False):
            continue
        if name in TLS_FILES:
            out[name] = str(files.path(_text(value, _at(key, name))))
        elif name == "insecure_skip_verify":
            out[name] = _bool(value, _at(key, name))
        else:
            raise _fail(_at(key, name), "not supported: Plait takes ca_file, cert_file, key_file "
                                        "and insecure_skip_verify")
    if bool(out.get("cert_file")) != bool(out.get("key_file")):
        missing = "key_file" if out.get("cert_file") else "cert_file"
        raise _fail(_at(key, missing), "client cert_file and key_file must both be set")
    return out or None


def _http_headers(c: dict, key: str, files: _File) -> dict[str, str]:
    """``http_config``'s ``basic_auth``/``authorization``/``bearer_token`` (at most one) as an
    ``Authorization`` header; proxies and OAuth 2.0 refused."""
    c = _mapping(c, key, HTTP_KEYS, "config.plain (http_config)")
    for name in HTTP_UNSUPPORTED:
        if c.get(name):
            raise _fail(_at(key, name), "not supported: Plait's sender connects directly, "
                                        "without a proxy or OAuth 2.0")
    auths = [n for n in ("basic_auth", "authorization", "bearer_token", "bearer_token_file") if c.get(n)]
    if len(auths) > 1:
        raise _fail(_at(key, auths[1]), "at most one of basic_auth, authorization, bearer_token & "
                                        "bearer_token_file must be configured")
    if not auths:
        return {}
    if auths[0] == "basic_auth":
        b = _mapping(c["basic_auth"], _at(key, "basic_auth"),
                     ("username", "username_file", "password", "password_file"), "config.BasicAuth")
        user = files.either(b, "username", "username_file", _at(key, "basic_auth"))
        password = files.either(b, "password", "password_file", _at(key, "basic_auth"))
        return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}
    if auths[0] == "authorization":
        a = _mapping(c["authorization"], _at(key, "authorization"),
                     ("type", "credentials", "credentials_file"), "config.Authorization")
        kind = _text(a.get("type"), _at(key, "authorization.type")) or "Bearer"
        if kind.lower() == "basic":
            raise _fail(_at(key, "authorization.type"),
                        'authorization type cannot be set to "basic", use "basic_auth" instead')
        return {"Authorization": f"{kind} {files.either(a, 'credentials', 'credentials_file', _at(key, 'authorization'))}"}
    token = files.either(c, "bearer_token", "bearer_token_file", key)
    return {"Authorization": f"Bearer {token}"}


def _common(kind: str, c: Any, key: str, ctx: _Context) -> tuple[dict, dict]:
    """(the integration's mapping, the receiver fields every kind shares)."""
    spec = _TYPES[kind].am_file
    keys, resolved_default, fields = spec.keys, spec.send_resolved, spec.fields
    http_keys = ("http_config",) if spec.http else ()
    c = _mapping(c, key, ("send_resolved",) + http_keys + keys, f"config.plain ({kind})")
    for name in keys:
        if c.get(name) not in (None, "", False, 0) and name in spec.refused:
            raise _fail(_at(key, name), spec.refused[name])
    http = c.get("http_config", ctx.glob.get("http_config")) if http_keys else None
    hkey = _at(key, "http_config")
    out = {"send_resolved": (_bool(c["send_resolved"], _at(key, "send_resolved"))
                           if c.get("send_resolved") is not None else resolved_default),
           "headers": _http_headers(http, hkey, ctx.files),
           "tls": _tls((http or {}).get("tls_config"), _at(hkey, "tls_config"), ctx.files),
           "alertmanager_fields": with_defaults(kind, {n: c[n] for n in fields
                                                       if c.get(n) not in (None, "", [], {})})}
    return c, out


def _receiver(r: Any, i: int, ctx: _Context, seen: set[str]) -> list[dict[str, Any]]:
    """One receiver as ReceiverConfig data per integration (type ``none`` without any)."""
    key = f"receivers.{i}"
    r = _mapping(r, key, ("name",) + tuple(KINDS) + OTHER_KINDS, "config.plain (receiver)")
    name = _text(r.get("name"), f"{key}.name")
    if not name:
        raise _fail(f"{key}.name", "missing name in receiver")
    if name in seen:
        raise _fail(f"{key}.name", f'notification config name "{name}" is not unique')
    seen.add(name)
    for kind in OTHER_KINDS:
        if r.get(kind):
            raise _fail(f"{key}.{kind}", f"not supported: Plait has no {kind.removesuffix('_configs')} "
                                         f"receiver (it delivers {', '.join(KINDS)})")
    found = [(kind, j, c) for kind in KINDS for j, c in enumerate(_list(r.get(kind), f"{key}.{kind}"))]
    if not found:
        return [{"name": name, "type": "none", "integration_of": name}]
    out = []
    for n, (kind, j, c) in enumerate(found):
        ikey = f"{key}.{kind}.{j}"
        own = f"{name}.{n}" if n else name
        if n and own in ctx.receivers:
            raise _fail(ikey, f"the receiver of this further integration would be named {own!r}, "
                              "which another receiver has: rename one of them")
        c, shared = _common(kind, c, ikey, ctx)
        data = _TYPES[kind].am_file.read(c, ikey, ctx)
        # fields that read resolved (a global default, a *_file secret) join the template fields
        fields = {**shared.pop("alertmanager_fields"), **data.pop("alertmanager_fields", {})}
        # every integration tells its whole group, as Alertmanager's notifiers are given it
        out.append({"name": own, "format": "alertmanager", **shared, **data,
                    "alertmanager_fields": fields, "integration_of": name})
    return out


# -- Plait's own settings: the ``plait:`` block ----------------------------------------------------

class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ReceiverExtras(_Model):
    """Plait's settings of one receiver (``plait.receivers.<name>``)."""

    bucket: BucketConfig | None = None
    format: str | None = Field(default=None, pattern="^(native|alertmanager)$")
    secret: str = ""
    headers: dict[str, str] = Field(default_factory=dict)
    templates: TemplatesConfig | None = None


class GroupingExtras(_Model):
    """``plait.grouping``: ``batch_size`` (split above it) and ``merge_groups``."""

    batch_size: int = Field(default=MAX_BATCH, ge=1, le=MAX_BATCH)
    merge_groups: bool = False


class DedupeExtras(DedupeConfig):
    """``plait.dedupe``; cooldown 0 unless given."""

    cooldown: Seconds = Field(default=0.0, ge=0)


class PlaitExtras(_Model):
    """The ``plait:`` block: what Alertmanager's file has no key for; all optional."""

    external_url: str = ""
    bucket: BucketConfig | None = None  # every receiver's, unless its own says otherwise
    receivers: dict[str, ReceiverExtras] = Field(default_factory=dict)
    grouping: GroupingExtras = Field(default_factory=GroupingExtras)
    dedupe: DedupeExtras = Field(default_factory=DedupeExtras)
    delivery: DeliveryConfig = Field(default_factory=DeliveryConfig)
    normalize: NormalizeConfig = Field(default_factory=NormalizeConfig)
    rules: RulesConfig = Field(default_factory=RulesConfig)
    ledger: bool = False  # every raw alert's outcome on alerts.ledger


def _apply_extras(receivers: list[dict], extras: PlaitExtras) -> None:
    """Each receiver's bucket, format, secret, headers and templates from the block."""
    names = list(dict.fromkeys(r["integration_of"] for r in receivers))
    for name in extras.receivers:
        if name not in names:
            raise _fail(f"plait.receivers.{name}", f"no receiver {name!r} in the file (known: {names})")
    default = extras.bucket.model_dump() if extras.bucket else UNLIMITED
    for r in receivers:
        own = extras.receivers.get(r["integration_of"])
        r["bucket"] = own.bucket.model_dump() if own and own.bucket else default
        if own is None:
            continue
        if own.format:
            r["format"] = own.format
        if own.templates:
            r["templates"] = own.templates.model_dump()
        r["secret"] = own.secret
        r["headers"] = {**r.get("headers", {}), **own.headers}


def _templates(data: dict, files: _File) -> list[str]:
    """The ``templates`` globs relative to the file's directory, in order (``FromGlobs``)."""
    out = []
    for i, pattern in enumerate(_list(data.get("templates"), "templates")):
        text = _text(pattern, f"templates.{i}")
        try:
            out += goglob.glob(str(files.path(text)))
        except ValueError as e:
            raise _fail(f"templates.{i}", f"{e}: {text!r}") from None
    return out


def translate(data: Any, base: str | Path = ".", extras: Any = None) -> AlertingConfig:
    """An Alertmanager document ``data`` as Plait's config; ``base``: the file's directory (for
    ``*_file`` and ``templates``), ``extras``: a ``plait:`` block given apart. Raises ConfigError
    for the first problem, naming its key as the file spells it."""
    if data is None:
        raise _fail("route", "no route provided in config")
    if not isinstance(data, dict):
        raise _fail("(top level)", "expected a mapping")
    data = dict(data)
    block = data.pop("plait", None)
    if block is not None and extras is not None:
        raise _fail("plait", "given twice: in the file and in PLAIT_ALERTMANAGER_EXTRAS")
    block = block if block is not None else extras
    _mapping(data, "", TOP_KEYS, "config.plain")
    files = _File(Path(base))
    ctx = _Context(data, files)
    receivers, seen = [], set()
    for i, r in enumerate(_list(data.get("receivers"), "receivers")):
        receivers += _receiver(r, i, ctx, seen)
    intervals = _time_intervals(data)
    route, timers, group_by = _root(data.get("route"), ctx)
    more = PlaitExtras.model_validate(validated(PlaitExtras, block, "plait"))
    _apply_extras(receivers, more)
    fanout: dict[str, list[str]] = {}
    for r in receivers:
        base = r.pop("integration_of")
        if base != r["name"]:
            fanout.setdefault(base, []).append(r["name"])
            if r.get("alertmanager_fields"):  # Alertmanager's .Receiver: the file's name
                r["alertmanager_fields"]["receiver"] = base
    resolve = duration(ctx.glob.get("resolve_timeout", "5m"), "global.resolve_timeout")
    if resolve <= 0:  # Alertmanager takes 0s: its alerts without endsAt then end as they come
        raise _fail("global.resolve_timeout", "must be more than 0s: an alert without endsAt "
                    "would resolve as it arrives")
    timing = {"group_wait": 30.0, "group_interval": 300.0, "repeat_interval": 4 * 3600.0, **timers,
              "resolve_timeout": resolve}
    plait = {"receivers": receivers, "route": route, "timing": timing,
             "grouping": {"group_by": group_by, **more.grouping.model_dump()},
             "inhibit_rules": _inhibit_rules(data.get("inhibit_rules")), "time_intervals": intervals,
             "dedupe": more.dedupe.model_dump(), "delivery": more.delivery.model_dump(),
             "normalize": more.normalize.model_dump(), "rules": more.rules.model_dump(),
             "external_url": more.external_url, "ledger": more.ledger, "fanout": fanout,
             "templates": _templates(data, files)}
    config = parse_config(plait)
    template_set(config)  # Go templates parsed at load (Alertmanager 0.25: at send; docs)
    return config


def load_alertmanager_config(path: str | Path, extras_path: str | Path = "") -> AlertingConfig:
    """Read and :func:`translate` an ``alertmanager.yml`` (and the ``plait:`` block's file). Raises
    ConfigError: unreadable, bad YAML, or the first bad key."""
    extras = None
    if extras_path:
        doc = read_yaml(extras_path)
        extras = _mapping(doc, "", ("plait",), "extras file").get("plait") if doc else None
    path = Path(path)
    return translate(read_yaml(path), path.resolve().parent, extras)


def _renderer() -> Any:
    """This build's Go-template renderer module, or None (another checkout's is not this build's)."""
    import importlib
    import importlib.util

    spec = importlib.util.find_spec("alerting.gotemplate")
    if spec is None or not spec.origin or Path(spec.origin).parent != Path(__file__).parent:
        return None
    return importlib.import_module("alerting.gotemplate")


def template_set(config: AlertingConfig) -> Any:
    """The Go templates of an Alertmanager file (defaults, then ``config.templates``) with every
    receiver's template fields parsed; None without a renderer. Raises ConfigError (``templates:
    <file>:<line>: <problem>`` or ``receivers.<name>.<field>: <problem>``)."""
    gotemplate = _renderer()
    if gotemplate is None:  # paths and fields kept, not read
        return None
    try:
        templates = gotemplate.load_templates(list(config.templates))
    except gotemplate.TemplateError as e:
        raise _fail("templates", str(e)) from None
    for r in config.receivers:
        for name, text in r.alertmanager_fields.items():
            if isinstance(text, str):
                try:
                    templates.check(text, f"receivers.{r.name}.{name}")
                except gotemplate.TemplateError as e:
                    raise _fail(f"receivers.{r.name}.{name}", str(e)) from None
    return templates


_CACHED: list[Any] = [None, None]


def cached_template_set(config: AlertingConfig) -> Any:
    """:func:`template_set` of ``config``, loaded once per configuration object."""
    if _CACHED[0] is not config:
        _CACHED[:] = [config, template_set(config)]
    return _CACHED[1]


# -- settings ------------------------------------------------------------------------------------

def enabled(settings: Any) -> bool:
    """Whether ``settings`` name an alerting configuration (Plait's or an Alertmanager file)."""
    return bool(settings.alerting_config or settings.alertmanager_config)


def load_configured(settings: Any) -> AlertingConfig:
    """The alerting configuration ``settings`` name (``PLAIT_ALERTMANAGER_CONFIG`` with extras, or
    ``PLAIT_ALERTING_CONFIG``), as the API, workers and reloads read it. Raises ConfigError: both
    or neither set, or an invalid file."""
    from alerting.config import load_config

    if settings.alerting_config and settings.alertmanager_config:
        raise ConfigError("PLAIT_ALERTING_CONFIG and PLAIT_ALERTMANAGER_CONFIG are both set: "
                          "set one of them")
    if settings.alertmanager_config:
        return load_alertmanager_config(settings.alertmanager_config, settings.alertmanager_extras)
    if settings.alerting_config:
        return load_config(settings.alerting_config)
    raise ConfigError("no alerting configuration: set PLAIT_ALERTMANAGER_CONFIG or "
                      "PLAIT_ALERTING_CONFIG")


def keep_removed_receivers(old: AlertingConfig, new: AlertingConfig) -> AlertingConfig:
    """``new`` plus a type ``none`` receiver per one of ``old`` it lacks, so held groups settle."""
    from alerting.config import ReceiverConfig

    names = {r.name for r in new.receivers}
    gone = [ReceiverConfig(name=r.name, type="none") for r in old.receivers if r.name not in names]
    return new.model_copy(update={"receivers": [*new.receivers, *gone]}) if gone else new


def reload_logged(reload: Callable[[], Any], process: str) -> str | None:
    """Call ``reload``; None when the new configuration is in use, else why it was refused (a
    bad or unreadable file: logged, and the configuration in use stays)."""
    import logging

    log = logging.getLogger("plait.alerting")
    try:
        reload()
    except Exception as e:  # noqa: BLE001 - whatever the file does, the one in use stays
        log.error("%s: configuration reload refused, the previous one stays: %s", process, e)
        return str(e) or type(e).__name__
    log.info("%s: configuration reloaded", process)
    return None


def on_sighup(reload: Callable[[], Any], process: str) -> None:
    """Call ``reload`` on SIGHUP in the running loop, as Alertmanager does; a failing file is
    logged and the configuration in use stays."""
    import asyncio
    import logging
    import signal

    log = logging.getLogger("plait.alerting")

    def handler() -> None:
        reload_logged(reload, process)

    try:
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, handler)
    except (ValueError, RuntimeError, NotImplementedError):  # not the main thread (a test client)
        log.debug("%s: no SIGHUP handler outside the main thread", process)
