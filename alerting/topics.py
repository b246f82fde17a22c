"""Topics the alerting room adds (Redis keys are in ``plait.keys``). ``alerts.funnel`` (also in
``plait.topics.ALL``: the API writes it) and the ``alerting-state`` changelog are created
explicitly by ``alerting.agents.register_alerting`` (docs/kafka-rules.md #7:
``topic_allow_declare=False``) with the same partition count, since a table partition is written
from its event's partition.
"""
from __future__ import annotations

from alerting.wire import FUNNEL_TOPIC

__all__ = ["FUNNEL_TOPIC"]

