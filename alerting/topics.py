"""Topics the alerting room adds, in one place (its Redis keys are in
``plait.keys``: ``alert_counters``, ``alert_silences``, ``alert_view``,
``slow_task_marker``).

``alerts.funnel`` (internal, keyed by receiver; in ``plait.topics.ALL`` too,
as the API writes it) and the changelog of the ``alerting-state`` table are
created by ``alerting.agents.register_alerting``
with ``plait.kafka_admin.create_topics``, explicitly, with the deployment's
partition count (docs/kafka-rules.md #7: Faust runs with ``topic_allow_declare=False``
and broker auto-creation picks its own defaults). The changelog and the
funnel topic must have the same partition count: a table partition is
written from the event partition it belongs to.
"""
from __future__ import annotations

from alerting.wire import FUNNEL_TOPIC

__all__ = ["FUNNEL_TOPIC"]

