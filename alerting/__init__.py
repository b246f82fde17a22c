"""The alert funnel: pure, clock-injected steps (:mod:`alerting.funnel`) and the async webhook
sender (:mod:`alerting.webhook`)."""
