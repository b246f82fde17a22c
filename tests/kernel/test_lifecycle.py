"""Task state rules: valid transitions, terminal states never change, repeats ignored."""
from __future__ import annotations

import pytest

from plait.events import Lifecycle
from plait.lifecycle import TERMINAL, apply, can_move, created
from plait.spec import ExportSpec


def ev(status: str, **kw) -> Lifecycle:
    return Lifecycle(taskId="t1", status=status, at=kw.pop("at", "2026-01-01T00:00:00Z"), **kw)


def run(*events: Lifecycle) -> dict:
    state = None
    for e in events:
        state = apply(state, e) or state
    return state


def test_happy_path_sets_timestamps_counts_and_progress():
    state = run(ev("CREATED", sysCode="s", userId="u"),
                ev("RUNNING", at="2026-01-01T00:00:01Z"),
                ev("PROGRESS", exportedRows=50, totalRows=200, at="2026-01-01T00:00:02Z"),
                ev("SUCCESS", exportedRows=200, at="2026-01-01T00:00:03Z"))
    assert state["status"] == "SUCCESS" and state["exportedRows"] == 200
    assert state["createdAt"] == "2026-01-01T00:00:00Z"
    assert state["startedAt"] == "2026-01-01T00:00:01Z"
    assert state["finishedAt"] == "2026-01-01T00:00:03Z" and state["progress"] == 1.0


def test_progress_is_a_fraction_when_total_known_and_none_otherwise():
    state = run(ev("CREATED"), ev("RUNNING"), ev("PROGRESS", exportedRows=50, totalRows=200))
    assert state["progress"] == 0.25 and state["status"] == "RUNNING"
    assert run(ev("CREATED"), ev("RUNNING"), ev("PROGRESS", exportedRows=5))["progress"] is None


@pytest.mark.parametrize("terminal", sorted(TERMINAL))
@pytest.mark.parametrize("late", ["RUNNING", "PROGRESS", "SUCCESS", "FAILED", "CANCELLED",
                                  "TIMEOUT", "CREATED", "WAITING"])
def test_a_terminal_task_never_changes_whatever_arrives_after_its_end(terminal, late):
    state = run(ev("CREATED"), ev("RUNNING"), ev(terminal))
    assert apply(state, ev(late, exportedRows=10**6, errorMessage="late",
                           at="2026-01-01T00:00:05Z")) is None


@pytest.mark.parametrize("terminal", sorted(TERMINAL))
def test_reports_dated_before_the_end_fold_the_same_whenever_they_arrive(terminal):
    # given a task's events in topic order: reports, then its end
    created = ev("CREATED", sysCode="s", userId="u")
    running = ev("RUNNING", workerId="w1", at="2026-01-01T00:00:01.000Z")
    page0 = ev("PROGRESS", exportedRows=50, totalRows=100, workerId="w1", at="2026-01-01T00:00:01.500Z")
    beat = ev("RUNNING", workerId="w1", at="2026-01-01T00:00:01.800Z")
    page1 = ev("PROGRESS", exportedRows=100, totalRows=100, workerId="w1", at="2026-01-01T00:00:02.000Z")
    end = ev(terminal, exportedRows=100 if terminal == "SUCCESS" else None, workerId="w2",
             errorMessage=None if terminal == "SUCCESS" else "stop", at="2026-01-01T00:00:03.000Z")
    replayed = run(created, running, page0, beat, page1, end)
    # when the live projection gets the end first (written through) and the reports after it
    for late in ([page1], [beat, page1], [page0, beat, page1], [page1, page0, beat]):
        early = [e for e in (page0, beat, page1) if e not in late]
        live = run(created, running, *early, end, *late)
        # then it reads the same as the replay of the topic
        assert live == replayed, late
    assert replayed["status"] == terminal and replayed["totalRows"] == 100
    assert replayed["heartbeatAt"] == "2026-01-01T00:00:02.000Z" and replayed["workerId"] == "w2"


def test_a_report_already_folded_changes_nothing():
    beat = ev("RUNNING", at="2026-01-01T00:00:01Z")
    page = ev("PROGRESS", exportedRows=5, at="2026-01-01T00:00:02Z")
    state = run(ev("CREATED"), ev("RUNNING"), beat, page)
    assert apply(state, page) is None and apply(state, beat) is None
    ended = run(ev("CREATED"), ev("RUNNING"), beat, page, ev("SUCCESS", at="2026-01-01T00:00:03Z"))
    assert apply(ended, page) is None and apply(ended, beat) is None


def test_redelivered_progress_never_lowers_the_count():
    state = run(ev("CREATED"), ev("RUNNING"), ev("PROGRESS", exportedRows=300),
                ev("PROGRESS", exportedRows=100))
    assert state["exportedRows"] == 300


def test_repeated_created_is_ignored():
    state = run(ev("CREATED"))
    assert apply(state, ev("CREATED")) is None


def test_forbidden_moves():
    assert not can_move("WAITING", "CREATED")
    assert not can_move("RUNNING", "WAITING")
    assert not can_move("CREATED", "PROGRESS")
    assert can_move("WAITING", "RUNNING") and can_move("CREATED", "CANCELLED")


def test_a_created_that_arrives_after_the_start_folds_as_if_first():
    # given admit's CREATED sent after the RUNNING of a promotion that raced it
    created = ev("CREATED", sysCode="s", userId="u", fingerprint="f", timeout=60.0,
                 at="2026-01-01T00:00:00.000Z")
    running = ev("RUNNING", sysCode="s", userId="u", workerId="w", at="2026-01-01T00:00:00.100Z")
    end = ev("SUCCESS", exportedRows=5, at="2026-01-01T00:00:01.000Z")
    # then the task reads the same as when CREATED came first
    assert run(running, created, end) == run(created, running, end)
    assert run(running, end, created) == run(created, running, end)
    assert run(running, created)["fingerprint"] == "f"
    assert run(running, created)["createdAt"] == "2026-01-01T00:00:00.000Z"


def test_created_carries_what_the_api_the_scheduler_and_admission_project():
    spec = ExportSpec.model_validate({
        "sysCode": "crm", "bizType": "orders", "bizDesc": "Orders", "userId": "u1",
        "dataConfig": {"dataApiUrl": "https://data.example/rows"},
        "documentConfig": {"fileName": "orders", "fileFormat": "csv"},
        "jobConfig": {"timeout": 120}})
    state = apply(None, created(spec, "t1", "fp1", "2026-01-01T00:00:00Z"))
    assert {k: state[k] for k in ("taskId", "status", "createdAt", "sysCode", "bizType",
                                  "bizDesc", "userId", "fileName", "fileFormat",
                                  "fingerprint", "timeout")} == {
        "taskId": "t1", "status": "CREATED", "createdAt": "2026-01-01T00:00:00Z",
        "sysCode": "crm", "bizType": "orders", "bizDesc": "Orders", "userId": "u1",
        "fileName": "orders", "fileFormat": "csv", "fingerprint": "fp1", "timeout": 120}
