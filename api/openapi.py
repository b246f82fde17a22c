"""What ``GET /openapi.json`` says beyond FastAPI's own: error statuses with
their envelope (:func:`errors`), bodies routes parse themselves
(:func:`request_body`), and links between operations (:func:`link`)."""
from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field

_REF = "#/components/schemas/{model}"
_BODY_MODELS: dict[str, Any] = {}


class FieldProblem(BaseModel):
    """One invalid field of a 422 (``plait.errors.FieldError.entry``)."""

    field: str = Field(description="where, as the caller spelt it: a dotted camelCase path "
                                   "(documentConfig.fileName, [1].labels.alertname) or body")
    rule: str = Field(description="what is wrong (is required, is not a known field, ...)")
    accepted: str | None = Field(None, description="what would be accepted, when the rule "
                                                   "does not say it already")
    code: str = Field(description="machine-readable rule: required, unknown, spelling, type, "
                                  "literal, json, ...")


class ErrorEnvelope(BaseModel):
    """Every error answer: ``code`` equals the HTTP status; ``data`` is
    ``{"errors": [FieldProblem...]}`` for a 422, the task's ``{"status"}`` for
    a 409, the quota (``dailyRows``, ``used``, ``remaining``, ``timezone``,
    ``resetsAt``) for a 429, else null (``api.envelope.error_response``)."""

    code: int = Field(description="the HTTP status again")
    message: str = Field(description="what went wrong and, where it helps, what to do")
    data: dict[str, Any] | None = Field(None, description="details, or null")


class Envelope(BaseModel):
    """Every success answer: ``{"code", "message", "data"}``."""

    code: int = Field(description="200 (also for the 202 of an accepted export, as the "
                                  "written contract says), 201 or 202")
    message: str
    data: Any = None


_MEANING = {
    401: "Unauthenticated: unsigned, badly signed, stale or replayed request, unknown appKey, "
         "or missing/unknown bearer token (only when a caller registry or token is configured)",
    403: "Forbidden: the caller's registry entry lacks the allowance, or a download link is "
         "expired or tampered",
    404: "Not found (or not visible to this caller: answered alike)",
    409: "Conflict: the resource's state refuses the call",
    422: "Invalid request: data.errors names each field as sent, the rule and what is accepted",
    429: "The caller's daily row quota (dailyRows) is used up, or jobConfig.maxRows is more "
         "than what is left: data names the quota, what is used and left, and resetsAt "
         "(RFC 3339)",
    503: "A dependency (Kafka, Redis) did not answer; retry later",
}


def errors(*statuses: int, validated: bool = True) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for the error ``statuses`` (plus 422 when ``validated``)."""
    codes = {*statuses, 422} if validated else set(statuses)
    return {s: {"model": ErrorEnvelope, "description": _MEANING[s]} for s in sorted(codes)}


def ok(status: int, description: str, **extra: Any) -> dict[int | str, dict[str, Any]]:
    """A ``responses=`` entry for an extra success answer in the envelope."""
    return {status: {"model": Envelope, "description": description, **extra}}


def link(operation_id: str, body_pointer: str, parameter: str,
         description: str = "") -> dict[str, Any]:
    """An OpenAPI link: ``parameter`` of ``operation_id`` from ``body_pointer``."""
    return {"operationId": operation_id, "description": description,
            "parameters": {parameter: f"$response.body#{body_pointer}"}}


def request_body(model: type[BaseModel] | Any, description: str, *,
                 array_of: bool = False, either: bool = False,
                 min_items: int = 1) -> dict[str, Any]:
    """``openapi_extra`` documenting a JSON body the route parses itself:
    ``model``, a list of it (``array_of``), or ``either``."""
    _BODY_MODELS[model.__name__] = model
    one = {"$ref": _REF.format(model=model.__name__)}
    many = {"type": "array", "items": one, "minItems": min_items}
    schema = {"oneOf": [one, many]} if either else many if array_of else one
    return {"requestBody": {"required": True, "description": description,
                            "content": {"application/json": {"schema": schema}}}}


_REQUIRED = "x-plait-required-query"
_REQUIRED_OPEN = "x-plait-required-query-open"


def required_query(*names: str) -> dict[str, Any]:
    """``openapi_extra`` marking query ``names`` required (checked by the route)."""
    return {_REQUIRED: list(names)}


def required_query_open(*names: str) -> dict[str, Any]:
    """:func:`required_query` only without a caller registry."""
    return {_REQUIRED_OPEN: list(names)}


def _mark_required(doc: dict[str, Any], open_mode: bool) -> None:
    for item in doc.get("paths", {}).values():
        for op in item.values():
            if not isinstance(op, dict):
                continue
            names = set(op.pop(_REQUIRED, []))
            open_names = op.pop(_REQUIRED_OPEN, [])
            if open_mode:
                names.update(open_names)
            if not names:
                continue
            for param in op.get("parameters", []):
                if param.get("in") == "query" and param.get("name") in names:
                    param["required"] = True
                    schema = param.get("schema", {})
                    # "str | None" documents a null the query string cannot carry
                    schema.pop("anyOf", None)
                    schema.pop("default", None)
                    schema.update(type="string", minLength=1)


def install_openapi(app: FastAPI, open_mode: bool = False) -> None:
    """Register :func:`request_body` models (FastAPI collects only those it
    validates) and apply the required-query marks."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        doc = generate()
        _mark_required(doc, open_mode)
        schemas = doc.setdefault("components", {}).setdefault("schemas", {})
        for name, model in _BODY_MODELS.items():
            js = model.model_json_schema(ref_template=_REF, mode="validation")
            schemas.update(js.pop("$defs", {}))
            schemas[name] = js
        app.openapi_schema = doc
        return doc

    app.openapi = openapi  # type: ignore[method-assign]


_TEXT = Field(min_length=1, max_length=8192)
_RFC3339 = "RFC 3339 timestamp with a time zone (2026-11-30T17:00:00Z)"
#: Severity spellings the intake takes (``alerting.intake.SEVERITY_ALIASES``, any case).
SEVERITIES = ("info", "information", "informational", "none", "low", "notice", "warning",
              "warn", "minor", "medium", "critical", "crit", "error", "major", "high", "page",
              "fatal", "emergency")
_STR_MAP = dict(json_schema_extra={"propertyNames": {"minLength": 1},
                                   "additionalProperties": {"type": "string",
                                                            "maxLength": 8192}})


class NativeAlert(BaseModel):
    """One native alert (``POST /alerts``; ``alerting.intake.from_native``)."""

    model_config = ConfigDict(extra="forbid")
    rule: str = Field(min_length=1, max_length=8192, description="what fired (the rule's name)")
    asset: str = Field(min_length=1, max_length=8192, description="what it fired on")
    severity: str = Field(json_schema_extra={"enum": list(SEVERITIES)},
                          description="info, warning or critical, or an alias (any case)")
    status: str = Field("firing", json_schema_extra={"enum": ["firing", "resolved"]})
    labels: dict[str, str] = Field(default_factory=dict, **_STR_MAP)
    annotations: dict[str, str] = Field(default_factory=dict, **_STR_MAP)
    time: str = Field(None, json_schema_extra={"format": "date-time"},
                             description=f"when it happened ({_RFC3339}); default now")
    startsAt: str = Field(None, json_schema_extra={"format": "date-time"},
                                 description=_RFC3339)
    endsAt: str = Field(None, json_schema_extra={"format": "date-time"},
                               description=f"{_RFC3339}; kept for resolved alerts")
    generatorURL: str = Field(None, max_length=8192)


class AlertmanagerLabels(BaseModel):
    """Labels of an Alertmanager alert: at least one; ``alertname`` is
    optional, as in Alertmanager (``Alert.Validate``, alert/alert.go)."""

    model_config = ConfigDict(extra="allow", json_schema_extra={
        "additionalProperties": {"type": "string", "maxLength": 8192},
        "propertyNames": {"minLength": 1}, "minProperties": 1})
    alertname: str = Field(None, max_length=8192)
    severity: str = Field(None, json_schema_extra={"enum": list(SEVERITIES)})


class AlertmanagerAlert(BaseModel):
    """Alertmanager's ``postableAlert`` (``POST /api/v2/alerts``)."""

    labels: AlertmanagerLabels
    annotations: dict[str, str] = Field(default_factory=dict, **_STR_MAP)
    startsAt: str = Field(None, json_schema_extra={"format": "date-time"})
    endsAt: str = Field(None, json_schema_extra={"format": "date-time"},
                               description="resolved when in the past")
    generatorURL: str = Field(None, max_length=8192)


#: The matcher form the document shows (never broad); the API takes more.
MATCHER_PATTERN = r'^[A-Za-z_][A-Za-z0-9_]*="[A-Za-z0-9_.-]+"$'


WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


class TimeRange(BaseModel):
    model_config = ConfigDict(extra="forbid")
    startTime: str = Field(pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$")
    endTime: str = Field(pattern=r"^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$")


class TimeIntervalBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    weekdays: list[str] = Field(default_factory=list, json_schema_extra={
        "items": {"type": "string", "enum": list(WEEKDAYS)}},
        description="monday..sunday (the API also takes ranges such as monday:friday)")
    times: list[TimeRange] = Field(default_factory=list)
    # no enum: schemathesis would try all ~600 zones every run
    location: str = Field("UTC", description="an IANA time zone name this server knows",
                          examples=["UTC", "Europe/Paris", "America/New_York"])


class SilenceBody(BaseModel):
    """A silence request (``POST /silences``; ``api.alerting_edge.parse_silence_request``).

    Refused with 422: a silence whose every matcher matches the empty string
    (or is negative) unless ``allowBroad``; ``endsAt`` not after ``startsAt``;
    ``endsAt`` missing without ``timeIntervals``."""

    model_config = ConfigDict(extra="forbid")
    matchers: list[str] = Field(min_length=1, json_schema_extra={
        "items": {"type": "string", "pattern": MATCHER_PATTERN}},
        description='Alertmanager matchers: name="value" with =, !=, =~ or !~ '
                    '(the schema shows the name="value" form, which is never broad), or objects '
                    '{"name", "value", "isRegex", "isEqual"}')
    startsAt: str = Field(None, json_schema_extra={"format": "date-time"},
                                 description=f"{_RFC3339}; default now")
    endsAt: str = Field(json_schema_extra={"format": "date-time"},
                        description=f"{_RFC3339}, after startsAt (optional with timeIntervals)")
    createdBy: str = Field(min_length=1, pattern=r"\S", description="who created it")
    comment: str = Field(min_length=1, pattern=r"\S", description="why it exists")
    allowBroad: bool = False
    timeIntervals: list[TimeIntervalBody] = Field(default_factory=list)
