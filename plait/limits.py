"""Concurrency limits and tenant tiers (``PLAIT_LIMITS``, JSON; absent limits are unlimited), e.g.
``{"global": 50, "perSysCode": 10, "sysCodes": {"acme": {"maxConcurrent": 2, "tier": "gold"}}}``. A
tier weights which waiting task starts next (stride scheduling, Waldspurger & Weihl 1995)."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Tier = Literal["platinum", "gold", "standard", "free"]

#: Starts per round of each tier (free differs by its daily quota, plait.quotas).
TIER_WEIGHTS: dict[str, int] = {"platinum": 4, "gold": 2, "standard": 1, "free": 1}


class CallerLimits(BaseModel):
    """One caller's (sysCode's) own limit and tier."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    maxConcurrent: int | None = Field(default=None, ge=1)
    tier: Tier = "standard"


class Limits(BaseModel):
    """Maximum concurrently running tasks per scope (None = unlimited)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    global_: int | None = Field(default=None, ge=1, alias="global")
    perSysCode: int | None = Field(default=None, ge=1)
    perUser: int | None = Field(default=None, ge=1)
    perBizType: int | None = Field(default=None, ge=1)
    sysCodes: dict[str, CallerLimits] = Field(default_factory=dict)

    def scopes(self, sys_code: str, biz_type: str, user_id: str) -> list[tuple[str, int]]:
        """The (scope name, limit) pairs a task of this caller counts against."""
        caller = self.sysCodes.get(sys_code)
        per_sys = caller.maxConcurrent if caller and caller.maxConcurrent else self.perSysCode
        pairs = [("global", self.global_), (f"sys:{sys_code}", per_sys),
                 (f"user:{sys_code}:{user_id}", self.perUser),
                 (f"biz:{sys_code}:{biz_type}", self.perBizType)]
        return [(name, limit) for name, limit in pairs if limit is not None]

    def weight(self, sys_code: str) -> int:
        """The tier weight of a caller (standard when not configured)."""
        caller = self.sysCodes.get(sys_code)
        return TIER_WEIGHTS[caller.tier if caller else "standard"]
