"""The task spec: validation messages name the field; fingerprint is canonical."""
from __future__ import annotations

import time

import pytest
from pydantic import ValidationError

from plait.spec import ExportSpec

BASE = {"sysCode": "s", "bizType": "b", "userId": "u",
        "dataConfig": {"dataApiUrl": "http://127.0.0.1:1/data", "queryConditions": {"a": 1, "b": 2}}}


def spec(**over) -> ExportSpec:
    return ExportSpec.model_validate({**BASE, **over})


def test_fingerprint_ignores_key_order_and_non_content_fields():
    a = spec()
    b = spec(dataConfig={"dataApiUrl": "http://127.0.0.1:1/data", "pageSize": 7,
                         "queryConditions": {"b": 2, "a": 1}})
    assert a.fingerprint() == b.fingerprint()
    assert a.fingerprint() != spec(userId="v").fingerprint()
    assert a.fingerprint() != spec(documentConfig={"fileFormat": "csv"}).fingerprint()


@pytest.mark.parametrize("change", [
    {"documentConfig": {"fileName": "other"}},
    {"documentConfig": {"csvFlavour": "plain"}},
    {"documentConfig": {"timeZone": "Asia/Tokyo"}},
    {"documentConfig": {"maxRowsPerFile": 1000}},
    {"jobConfig": {"maxRows": 10}},
    {"dataConfig": {"dataApiUrl": "http://127.0.0.1:2/data", "queryConditions": {"a": 1, "b": 2}}},
])
def test_anything_that_changes_the_file_changes_the_fingerprint(change):
    assert spec().fingerprint() != spec(**change).fingerprint()


def test_pull_mode_needs_an_http_url():
    with pytest.raises(ValidationError, match="dataApiUrl is required"):
        spec(dataConfig={"mode": "pull"})
    with pytest.raises(ValidationError, match="http:// or https://"):
        spec(dataConfig={"dataApiUrl": "file:///etc/passwd"})
    assert spec(dataConfig={"mode": "push"}).dataConfig.dataApiUrl is None


def test_too_many_declared_columns_for_xlsx_names_the_limit_and_alternatives():
    cols = [{"fieldName": f"c{i}"} for i in range(16_385)]
    with pytest.raises(ValidationError, match=r"16,384 columns.*csv or parquet"):
        spec(documentConfig={"fileFormat": "xlsx", "columns": cols})
    # past xlsx's limit, the columns are left undeclared: declared, they pass the
    # bytes one Kafka record carries (plait.spec.MAX_SPEC_BYTES)
    with pytest.raises(ValidationError, match=r"documentConfig.columns\n.* at most 196608 bytes"):
        spec(documentConfig={"fileFormat": "csv", "columns": cols})
    assert len(spec(documentConfig={"fileFormat": "csv", "columns": cols[:8000]})
               .documentConfig.columns) == 8000


def test_checking_many_columns_costs_time_linear_in_their_number():
    # given specs of 1,000 and 8,000 declared columns (8,000 is about what one Kafka
    # record carries), each named once
    def cpu_to_check(n: int) -> float:
        cols = [{"fieldName": f"c{i}"} for i in range(n)]
        best = float("inf")
        for _ in range(3):  # the least of three: this thread's CPU, less the machine's noise
            started = time.thread_time()
            spec(documentConfig={"fileFormat": "csv", "columns": cols})
            best = min(best, time.thread_time() - started)
        return best

    # when each is checked (the API does it on its event loop)
    small, large = cpu_to_check(1_000), cpu_to_check(8_000)
    # then eight times the columns costs near eight times the CPU (under 24), not the 64
    # times a pairwise scan for repeated names would (a ratio: the machine's speed cancels)
    assert large < 24 * small, (small, large)


def test_the_one_xlsx_column_check_is_excels_limit_for_xlsx_only():
    from plait.errors import PermanentError
    from plait.spec import XLSX_DATA_TOO_WIDE, check_xlsx_columns, xlsx_columns_fit

    assert xlsx_columns_fit(16_384) and not xlsx_columns_fit(16_385)
    check_xlsx_columns("xlsx", 16_384)
    check_xlsx_columns("csv", 10**6)
    with pytest.raises(PermanentError, match=r"^xlsx allows at most 16,384 columns \(Excel limit\); "
                                             r"the data has 16,385: choose csv or parquet"):
        check_xlsx_columns("xlsx", 16_385, PermanentError, XLSX_DATA_TOO_WIDE)


def test_unknown_fields_are_refused():
    with pytest.raises(ValidationError, match="extra"):
        spec(jobConfig={"timeoutt": 5})
