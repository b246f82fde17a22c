"""Speed rules of the funnel (issue 11 item 5) that a unit test can hold:
work per event must not grow with the storm (queued sections, open groups,
alerts seen)."""
from __future__ import annotations

from alerting.outbox import unqueue


class NoScan(list):
    """An outbox that fails the test when scanned."""

    def __iter__(self):
        raise AssertionError("the outbox was scanned")


def test_unqueue_does_not_scan_the_outbox_for_a_group_not_queued():
    # given an outbox of many queued sections, none of group g
    outbox = NoScan([{"group_id": f"other{i}"} for i in range(3)])
    g = {"id": "g", "members": {}}
    # when g is evaluated and the caller knows g is not queued
    got = unqueue(g, outbox, queued={"other0", "other1", "other2"})
    # then its sections go to the end, nothing scanned
    assert got == {"at": 3, "merged": False}
