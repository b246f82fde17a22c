"""The alert funnel: pure, clock-injected steps (normalize, fingerprint/dedupe,
silence, group, token bucket, delivery schedule) in :mod:`alerting.funnel`,
and the async webhook sender in :mod:`alerting.webhook`."""
