"""The funnel's stages in pipeline order, listed once (as Alertmanager's notify.go builds its stage
list); :class:`alerting.funnel.Funnel` is made of them over :mod:`alerting.stages.state`."""
from alerting.stages.bucket import Bucket
from alerting.stages.dedupe import Dedupe
from alerting.stages.dispatch import Dispatch
from alerting.stages.group import Grouping
from alerting.stages.inhibit import Inhibit
from alerting.stages.silence import Silences

#: dedupe -> inhibit -> silence -> group -> bucket -> dispatch
STAGES = (Dedupe, Inhibit, Silences, Grouping, Bucket, Dispatch)
