"""ops.stack.Stack: a start that fails leaves nothing running."""
from __future__ import annotations

import pytest

from ops.stack import Stack
from stack_env import isolated_env


@pytest.mark.integration
def test_a_part_that_cannot_start_fails_start_and_everything_is_stopped(tmp_path):
    bad = tmp_path / "alerting.yaml"
    bad.write_text("receivers: 3\n")  # the API and the worker refuse it at start-up
    stack = Stack(tmp_path / "stack", isolated_env(PLAIT_ALERTING_CONFIG=str(bad)))
    with pytest.raises(RuntimeError, match=r"(api|worker-0) exited; see "):
        stack.start(workers=1)
    assert stack.procs == {}
    assert stack.broker is not None and stack.broker.proc.poll() is not None
