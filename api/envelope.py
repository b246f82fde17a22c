"""The envelope ``{"code", "message", "data"}`` (code = HTTP status; README
"API errors") and the one place errors become HTTP answers. A 4xx lists
``data.errors[]`` of ``{field, rule, accepted, code}``, ``field`` a dotted
camelCase path as the caller spelt it (``body``: the whole body)."""
from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from plait.errors import AuthError, FieldError, PlaitError, RequestInvalid, Unavailable
from plait.spec import deeper_than

#: Called with (request, error) for every AuthError (the audit trail).
OnRefused = Callable[[Request, AuthError], Awaitable[None]]

_LEADING_FIELD = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*): (.+)$", re.S)


def envelope(status: int, message: str, data: Any = None) -> JSONResponse:
    """A JSON response whose ``code`` equals the HTTP status."""
    return JSONResponse({"code": status, "message": message, "data": data}, status_code=status)


def error_response(exc: PlaitError) -> JSONResponse:
    """The envelope of a :class:`PlaitError`, with its ``headers`` (Retry-After)."""
    message = f"invalid request: {exc.message}" if isinstance(exc, FieldError) else exc.message
    resp = envelope(exc.status, message, exc.data())
    resp.headers.update(getattr(exc, "headers", None) or {})
    return resp


ALERTMANAGER_PREFIX = "/api/v2/"


def alertmanager_error(exc: PlaitError) -> JSONResponse:
    """An error as Alertmanager's OpenAPI answers it: a JSON string; 400 for
    caller input, 415 for a non-JSON Content-Type, else the error's status."""
    status = exc.status
    if isinstance(exc, FieldError):
        status = 415 if exc.code == "content_type" else 400
    return JSONResponse(exc.message, status_code=status)


def _answer(request: Request, exc: PlaitError) -> JSONResponse:
    if request.url.path.startswith(ALERTMANAGER_PREFIX) and not isinstance(exc, AuthError):
        return alertmanager_error(exc)
    return error_response(exc)


def field_path(loc: tuple | list) -> str:
    """``("body", "documentConfig", "columns", 0, "type")`` ->
    ``documentConfig.columns.0.type``; the body itself is ``body``."""
    parts = [str(p) for p in loc[1:]] if loc and loc[0] in ("body", "query", "path", "header") \
        else [str(p) for p in loc]
    return ".".join(parts) or "body"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _model_fields(model: Any, path: list[str]) -> list[str] | None:
    from pydantic import BaseModel

    current = model
    for part in path:
        if part.isdigit():
            continue
        fields = getattr(current, "model_fields", {})
        field = fields.get(part) or next(
            (f for f in fields.values() if f.alias == part), None)
        if field is None:
            return None
        current = _inner_model(field.annotation)
        if current is None:
            return None
    if isinstance(current, type) and issubclass(current, BaseModel):
        return [f.alias or name for name, f in current.model_fields.items()]
    return None


def _inner_model(annotation: Any) -> Any:
    from typing import get_args

    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def _json_error(exc: Any) -> FieldError:
    line, col = getattr(exc, "lineno", None), getattr(exc, "colno", None)
    where = f" at line {line} column {col}" if line else ""
    reason = getattr(exc, "msg", None) or str(exc)
    return FieldError("body", f"is not valid JSON{where} ({reason})",
                      "a JSON object, sent with Content-Type: application/json", "json")


_JSON_BODY = "a JSON object, sent with Content-Type: application/json"
#: pydantic ``ctx`` keys -> what would be accepted.
_LIMITS = {"ge": ">= {}", "gt": "> {}", "le": "<= {}", "lt": "< {}",
           "min_length": "at least {} characters or items", "max_length": "at most {} characters or items",
           "pattern": "text matching {}", "expected": "{}"}


def _accepted_from_ctx(ctx: dict[str, Any]) -> str | None:
    parts = [text.format(ctx[key]) for key, text in _LIMITS.items() if key in ctx]
    return " and ".join(parts) or None


def field_error(err: dict[str, Any], model: Any = None, content_type: str | None = None) -> FieldError:
    """One pydantic error as a :class:`FieldError`; with the body's ``model``,
    a snake_case key of a known field is answered with the camelCase name."""
    kind, loc, msg = err.get("type", ""), list(err.get("loc") or ()), str(err.get("msg", ""))
    field = field_path(loc)
    ctx = err.get("ctx") or {}
    path = [str(p) for p in loc[1:]] if loc and loc[0] == "body" else None
    if kind == "json_invalid":  # loc is ("body", <character offset>)
        at = f" at character {loc[-1]}" if loc and isinstance(loc[-1], int) else ""
        return FieldError("body", f"is not valid JSON{at} ({ctx.get('error') or msg})",
                          _JSON_BODY, "json")
    if kind == "value_error":
        msg = msg.removeprefix("Value error, ")
        m = _LEADING_FIELD.match(msg)
        known = _model_fields(model, path) if model is not None and path is not None else None
        first = msg.split(" ", 1)
        if m:  # "timeZone: ..." from a model validator
            field = m.group(1) if field == "body" else f"{field}.{m.group(1)}"
            msg = m.group(2)
        elif known and len(first) == 2 and first[0] in known:  # "dataApiUrl is required ..."
            field = first[0] if field == "body" else f"{field}.{first[0]}"
            msg = first[1]
        return FieldError(field, msg, None, "value")
    if kind == "missing":
        accepted = (_JSON_BODY if field == "body" else
                    f"the query parameter {field}=<value>" if loc and loc[0] == "query" else None)
        return FieldError(field, "is required", accepted, "required")
    if kind == "extra_forbidden":
        name = str(loc[-1]) if loc else field
        path = [str(p) for p in loc[1:-1]] if loc and loc[0] == "body" else []
        known = _model_fields(model, path) if model is not None else None
        if "_" in name and known and _camel(name) in known:
            return FieldError(field, "snake_case spelling is not accepted", _camel(name), "spelling")
        accepted = _join(sorted(known)) if known else None
        return FieldError(field, "is not a known field", accepted, "unknown")
    if kind in ("dict_type", "model_type", "model_attributes_type") and field == "body":
        if isinstance(err.get("input"), (str, bytes)) and "json" not in (content_type or ""):
            sent = f"Content-Type {content_type!r}" if content_type else "no Content-Type"
            return FieldError("body", f"was not read as JSON: the request has {sent}",
                              _JSON_BODY, "content_type")
        return FieldError("body", "must be a JSON object", _JSON_BODY, "type")
    if kind == "literal_error":
        return FieldError(field, "is not one of the allowed values", ctx.get("expected"), "literal")
    return FieldError(field, msg, _accepted_from_ctx(ctx), kind or "invalid")


def validation_errors(errors: list[dict[str, Any]], model: Any = None,
                      content_type: str | None = None) -> RequestInvalid:
    """Every pydantic error of a request as one :class:`RequestInvalid`."""
    return RequestInvalid([field_error(e, model, content_type) for e in errors] or
                          [FieldError("body", "is invalid", None, "invalid")])


def _body_model(request: Request) -> Any:
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    for param in getattr(dependant, "body_params", None) or []:
        annotation = getattr(getattr(param, "field_info", None), "annotation", None)
        if annotation is not None:
            return annotation
    return None


async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    """422 naming every invalid field (400 text on Alertmanager's paths)."""
    return _answer(request, validation_errors(list(exc.errors()), _body_model(request),
                                              request.headers.get("content-type")))


async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    """404, 405 and unparsable bodies (422 naming ``body``) in the envelope."""
    if exc.status_code == 400 and "JSON" in str(exc.detail):
        return _answer(request, _json_error(exc))
    if exc.status_code == 400:  # not UTF-8
        return _answer(request, FieldError("body", "could not be read as JSON: it is not UTF-8, "
                                           "nests too deep, or holds a number of over 4,300 "
                                           "digits", _JSON_BODY, "json"))
    return envelope(exc.status_code, str(exc.detail))


def install_error_handlers(app: FastAPI, on_refused: OnRefused | None = None) -> None:
    """Map every error to its answer: validation 422, :class:`PlaitError` its
    status, Redis down 503; ``on_refused`` runs first for each :class:`AuthError`."""

    async def plait_error(request: Request, exc: PlaitError) -> JSONResponse:
        if isinstance(exc, AuthError) and on_refused is not None:
            await on_refused(request, exc)
        return _answer(request, exc)

    async def redis_down(request: Request, exc: Exception) -> JSONResponse:
        return _answer(request, Unavailable(f"Redis did not answer; retry later "
                                            f"({type(exc).__name__})"))

    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(RedisConnectionError, redis_down)
    app.add_exception_handler(RedisTimeoutError, redis_down)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(PlaitError, plait_error)


def _route_query(request: Request) -> set[str]:
    dependant = getattr(request.scope.get("route"), "dependant", None)
    return {p.alias for p in getattr(dependant, "query_params", None) or []}


async def refuse_snake_query(request: Request) -> None:
    """Raises ``FieldError`` (``spelling``) for ``?user_id=`` where the route takes ``userId``."""
    known = _route_query(request)
    for name in request.query_params:
        if "_" in name and name not in known and _camel(name) in known:
            raise FieldError(name, "snake_case spelling is not accepted", _camel(name), "spelling")


async def refuse_unknown_query(request: Request) -> None:
    """Raises ``FieldError`` (``unknown``) for a query parameter the route does
    not take: a misspelt filter would silently widen the answer."""
    known = _route_query(request)
    for name in request.query_params:
        if name not in known:
            raise FieldError(name, "is not a query parameter of this route",
                             ", ".join(sorted(known)), "unknown")


def parse_json_body(raw: bytes) -> Any:
    """The JSON document of a raw body; ``FieldError`` when empty or not JSON."""
    if not raw.strip():
        raise FieldError("body", "is empty", "a JSON document, sent with "
                         "Content-Type: application/json", "required")
    too_deep = False
    try:
        doc = json.loads(raw)
    except UnicodeDecodeError:
        raise FieldError("body", "is not UTF-8 text", "a UTF-8 JSON document", "json") from None
    except RecursionError:
        too_deep = True  # deeper than Python's reader goes: refused below by the same rule
    except ValueError as exc:
        raise _json_error(exc) from None
    if too_deep or deeper_than(doc, MAX_JSON_DEPTH):
        raise FieldError("body", f"nests arrays and objects more than {MAX_JSON_DEPTH} deep",
                         "an alert, silence or list of them as JSON", "json")
    return doc


#: Deepest nesting of arrays and objects a JSON body may have (an alert list nests 3).
MAX_JSON_DEPTH = 64


