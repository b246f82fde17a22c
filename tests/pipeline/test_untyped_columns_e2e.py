"""Flights through the real stack with the columns as the contract writes them
(``headerName`` + ``fieldName``, no type) and with no columns: the same file,
byte for byte, as with the demo's typed columns (docs/fidelity-rules.md,
"Fast page decode": the types inferred per page are the declared ones)."""
from __future__ import annotations

import pytest

from ops.demo import flights_spec
from support import submit, wait_task, warm_up

pytestmark = pytest.mark.integration


#: Column shapes: the demo's typed columns as they are, the contract's
#: (``headerName`` + ``fieldName``), none.
SHAPES = {"typed": lambda cols: cols,
          "contract": lambda cols: [{"headerName": c["fieldName"], "fieldName": c["fieldName"]}
                                    for c in cols],
          "none": lambda cols: None}


def spec_of(data_api: str, fmt: str, shape: str) -> dict:
    """12,000 flights in pages of 5,000, columns in ``shape``."""
    spec = flights_spec(f"{data_api}/data", fmt, 12_000)
    spec["dataConfig"]["pageSize"] = 5_000
    spec["userId"] = f"untyped-{shape}"
    spec["documentConfig"]["columns"] = SHAPES[shape](spec["documentConfig"]["columns"])
    return spec


@pytest.mark.parametrize("fmt", ["csv", "parquet", "jsonl"])
def test_untyped_flights_give_the_typed_file(stack, fmt):
    warm_up(stack)
    files, quality = {}, {}
    for shape in ("typed", "contract", "none"):
        task = wait_task(stack.api_url, submit(stack.api_url, spec_of(stack.demo_data_api,
                                                                       fmt, shape)))
        assert task["status"] == "SUCCESS", task
        assert task["exportedRows"] == 12_000, task
        quality[shape] = task["quality"]
        files[shape] = (task["file"]["sha256"], task["file"]["bytes"])
    assert files["contract"] == files["typed"] == files["none"], files
    assert quality["contract"] == quality["typed"] == quality["none"], quality
