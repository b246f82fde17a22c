"""Tenant isolation: api.auth.task_visible decides what a caller and user may
see; tested on task states written by the real projection in Redis."""
from __future__ import annotations

import pytest
from security_helpers import make_caller

from api.auth import task_visible
from plait.events import Lifecycle
from plait.projection import Projection

CRM = make_caller()
ERP = make_caller(sysCode="erp", appKey="erp-app")


@pytest.fixture
async def tasks(redis_prefix):
    """A projection holding crm/alice, crm/bob and erp/alice tasks."""
    client, prefix = redis_prefix
    projection = Projection(client, prefix)
    for task_id, sys_code, user in [("t-crm-alice", "crm", "alice"), ("t-crm-bob", "crm", "bob"),
                                    ("t-erp-alice", "erp", "alice")]:
        await projection.apply(Lifecycle(taskId=task_id, status="CREATED", sysCode=sys_code,
                                         bizType="orders", userId=user, fileName="f",
                                         fileFormat="csv"))
    return projection


@pytest.mark.parametrize("caller,user,task_id,visible", [
    (CRM, "alice", "t-crm-alice", True),
    (CRM, "bob", "t-crm-alice", False),      # another user of the same system
    (ERP, "alice", "t-crm-alice", False),    # same user id, another system
    (CRM, "alice", "t-erp-alice", False),
    (CRM, None, "t-crm-alice", False),       # no user named
    (CRM, "", "t-crm-alice", False),
    (CRM, "alice", "t-unknown", False),      # unknown: same answer as not yours
])
async def test_only_the_owner_within_its_sys_code_sees_a_task(tasks, caller, user, task_id,
                                                               visible):
    # given tasks of several tenants, when a caller asks for one, then only its own is visible
    assert task_visible(await tasks.get(task_id), caller, user) is visible


async def test_listing_scoped_to_the_caller_and_user_returns_only_their_tasks(tasks):
    # given the API lists with the authenticated caller's sysCode and the user
    listed, _next = await tasks.page(CRM.sysCode, "alice", 100)
    # then only crm/alice's task, and every listed task passes task_visible
    assert [t["taskId"] for t in listed] == ["t-crm-alice"]
    assert all(task_visible(t, CRM, "alice") for t in listed)
