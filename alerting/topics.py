"""Topics and Redis keys the alerting room adds, in one place.

``alerts.funnel`` (internal, keyed by receiver) and the changelog of the
``alerting-state`` table are created by ``alerting.agents.register_alerting``
with ``plait.kafka_admin.create_topics``, explicitly, with the deployment's
partition count (PITFALLS.md #7: Faust runs with ``topic_allow_declare=False``
and broker auto-creation picks its own defaults). The changelog and the
funnel topic must have the same partition count: a table partition is
written from the event partition it belongs to.
"""
from __future__ import annotations

from alerting.wire import FUNNEL_TOPIC

#: Redis hash: field = funnel partition, value = that partition's counters (JSON).
COUNTERS_KEY = "{prefix}:alerts:counters"
#: Redis hash: field = silence id, value = the silence (JSON, as created).
SILENCES_KEY = "{prefix}:alerts:silences"
#: Redis hash per funnel partition: field = episode key, value = the current
#: alert as Alertmanager's gettableAlert (JSON); see :mod:`alerting.view`.
VIEW_KEY = "{prefix}:alerts:view:{partition}"

__all__ = ["COUNTERS_KEY", "SILENCES_KEY", "VIEW_KEY", "FUNNEL_TOPIC"]

