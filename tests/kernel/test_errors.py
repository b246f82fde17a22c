"""The one error tree (plait/errors.py): every error Plait raises on purpose
has one root, a branch that says who acts on it, and an HTTP status."""
from __future__ import annotations

import pytest

from alerting.config import ConfigError as AlertingConfigError
from alerting.model import AlertRejected
from alerting.silence import SilenceRefused
from api.auth import AuthError as ApiAuthError
from plait.callers import CallerConfigError, NotAllowed
from plait.errors import (AuthError, ConfigError, Conflict, FieldError, Forbidden, NotFound,
                          PermanentError, PlaitError, PoisonError, RetryableError, Unavailable)
from producers.token import DataTokenError


@pytest.mark.parametrize("error, branch, status", [
    (NotAllowed("bizType", "is not allowed", "allowlist"), FieldError, 422),
    (AlertRejected("labels.alertname", "is required"), FieldError, 422),
    (SilenceRefused("endsAt", "must be after startsAt"), FieldError, 422),
    (AuthError("unsigned"), AuthError, 401),
    (Forbidden("no alertIngest"), AuthError, 403),
    (DataTokenError("expired"), AuthError, 401),
    (NotFound("task t not found"), NotFound, 404),
    (Conflict("task t already ended"), Conflict, 409),
    (Unavailable("Kafka did not ack"), Unavailable, 503),
    (CallerConfigError("callers.crm.maxRows: bad"), ConfigError, 500),
    (AlertingConfigError("timing.group_wait: bad"), ConfigError, 500),
])
def test_every_error_has_one_root_a_branch_and_a_status(error, branch, status):
    assert isinstance(error, PlaitError) and isinstance(error, branch)
    assert error.status == status


def test_start_up_and_input_errors_are_not_task_failures():
    for error in (CallerConfigError("x"), AlertingConfigError("x"), AlertRejected("f", "p"),
                  SilenceRefused("f", "p")):
        assert not isinstance(error, (PermanentError, RetryableError, PoisonError))
    assert ApiAuthError is AuthError and AlertingConfigError is ConfigError


def test_a_field_error_names_the_field_the_rule_and_what_is_accepted():
    e = FieldError("documentConfig.fileFormat", "is not one of the allowed values",
                   "csv, xlsx, parquet or jsonl", "literal")
    assert str(e) == ("documentConfig.fileFormat: is not one of the allowed values "
                      "(accepted: csv, xlsx, parquet or jsonl)")
    assert e.data() == {"errors": [{"field": "documentConfig.fileFormat",
                                    "rule": "is not one of the allowed values",
                                    "accepted": "csv, xlsx, parquet or jsonl", "code": "literal"}]}
    assert isinstance(e, ValueError)  # pydantic validators may raise it
    assert Conflict("ended", {"status": "SUCCESS"}).data() == {"status": "SUCCESS"}
