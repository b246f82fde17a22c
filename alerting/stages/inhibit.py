"""Inhibition stage (Alertmanager's inhibit/inhibit.go; docs/alerting.md, "Inhibition"). Firing
sources, this partition's episodes and other partitions' ``sources`` items, are indexed per rule by
their ``equal`` values: one dict lookup per rule."""
from __future__ import annotations

from typing import Any

from alerting.dedupe import DEDUPED
from alerting.model import Alert, LedgerEntry, Outcome
from alerting.matchers import Matcher, parse_matcher
from alerting.stages.base import StageBase

#: The episode status an inhibition source of another partition is indexed with.
_FIRING, _RESOLVED = {"status": "firing"}, {"status": "resolved"}


class Inhibit(StageBase):
    """The inhibition index over the funnel's episodes."""

    def start(self) -> None:
        self._inhibit: list[tuple[list[Matcher], list[Matcher], tuple[str, ...]]] = [
            ([parse_matcher(m) for m in r.source_matchers],
             [parse_matcher(m) for m in r.target_matchers], tuple(r.equal))
            for r in self.config.inhibit_rules]
        #: per rule: equal-label values -> {source fp: source also matches the target side}
        self._sources: list[dict[tuple[str, ...], dict[str, bool]]] = [{} for _ in self._inhibit]
        #: source fp -> [(rule index, equal values)] where it is indexed
        self._source_keys: dict[str, list[tuple[int, tuple[str, ...]]]] = {}
        #: fingerprints of firing episodes currently marked inhibited
        self._inhibited: set[str] = set()
        #: a source left the index since the last tick (or a load): re-check the inhibited
        self._sources_left = True
        #: sources of other partitions: fp -> {"labels", "expires_at"} (:meth:`take_source`)
        self._foreign: dict[str, dict[str, Any]] = self.state.setdefault("foreign", {})
        #: fingerprints of ``_foreign`` entries changed since :meth:`take_foreign_written`
        self._foreign_written: set[str] = set()
        for fp, ep in self.state["episodes"].items():
            if self._inhibit:
                self._index_source(fp, ep, Alert.from_dict(ep["alert"]).match_labels())
            if ep.get("inhibited_by"):  # re-checked at the first tick: a reload may free it
                self._inhibited.add(fp)
        if self._inhibit:
            for fp, src in self._foreign.items():
                self._index_source(fp, _FIRING, src["labels"])

    def take_source(self, item: dict[str, Any], now: float) -> bool:
        """Index (firing) or drop (resolved) an inhibition source whose own routes live on other
        partitions: one ``sources`` item, ``{"fp", "labels", "status", "ends_at"}``
        (:func:`alerting.wire.source_copies`). It expires as an episode does: at its future
        ``ends_at``, else ``timing.resolve_timeout`` after ``now``; every firing copy moves that.
        True when a source left (its targets are re-checked at the next tick). Raises ValueError
        for an item of another shape."""
        fp, labels = (item.get("fp"), item.get("labels")) if isinstance(item, dict) else (None, None)
        if not isinstance(fp, str) or not isinstance(labels, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
            raise ValueError(f"not an inhibition source: {str(item)[:200]}")
        if item.get("status") == "firing":
            ends = item.get("ends_at")
            exp = ends if isinstance(ends, (int, float)) and ends > now \
                else now + self.config.timing.resolve_timeout
            self._foreign[fp] = {"labels": labels, "expires_at": exp}
            nxt = self.state.get("next_foreign_expiry")
            if nxt is None or exp < nxt:
                self.state["next_foreign_expiry"] = exp
            self._index_source(fp, _FIRING, labels)
            self._foreign_written.add(fp)
            return False
        if self._foreign.pop(fp, None) is None:
            return False
        self._index_source(fp, _RESOLVED, labels)
        self._foreign_written.add(fp)
        return True

    def _expire_foreign(self, now: float) -> None:
        """Drop the sources of other partitions past ``expires_at`` (a missed resolve ends as an
        episode's does); scans only when the earliest expiry is due."""
        nxt = self.state.get("next_foreign_expiry")
        if nxt is None or now + 1e-9 < nxt:
            return
        upcoming = None
        for fp, src in list(self._foreign.items()):
            if src["expires_at"] > now + 1e-9:
                upcoming = src["expires_at"] if upcoming is None else min(upcoming, src["expires_at"])
                continue
            del self._foreign[fp]
            self._foreign_written.add(fp)
            self._index_source(fp, _RESOLVED, src["labels"])
        self.state["next_foreign_expiry"] = upcoming

    def take_foreign_written(self) -> set[str]:
        """Fingerprints of the other partitions' sources changed since the last call (their table
        entities to write)."""
        if not self._foreign_written:
            return set()
        out, self._foreign_written = self._foreign_written, set()
        return out

    def _inhibit_alert(self, fp: str, verdict: str, ep: dict[str, Any] | None,
                       labels: dict[str, str], rid: str, now: float) -> LedgerEntry | None:
        """Index the alert as a source; its ``inhibited`` entry, else None. Resolves are checked at
        their group's flush (Alertmanager's MuteStage), so resolve order does not matter. An alert
        whose routes reach this partition now is a source of its own here: a copy from the
        partition its routes reached before goes."""
        if fp in self._foreign:
            del self._foreign[fp]
            self._foreign_written.add(fp)
        if not self._inhibit:
            return None
        if ep is not None and verdict not in DEDUPED:
            # a deduplicated alert leaves the episode as it was: so does the index
            self._index_source(fp, ep, labels)
        inhibited = self._inhibitors(fp, labels)
        if inhibited is None or verdict == "resolved":
            return None
        self._muted_alert(fp, verdict, ep, "inhibited_by", inhibited[1], now)
        return self._final(rid, Outcome.INHIBITED, now, fp=fp, inhibited_by=inhibited)

    def muted(self) -> set[str]:
        """Fingerprints of firing episodes marked silenced or inhibited."""
        return set(self.state["silenced"]) | self._inhibited

    def _index_source(self, fp: str, ep: dict[str, Any], labels: dict[str, str]) -> None:
        """Keep the source index in step with episode ``fp``: indexed under every rule whose source
        side its labels match while it fires, nowhere once it resolved."""
        keys: list[tuple[int, tuple[str, ...]]] = []
        if ep["status"] == "firing":
            for i, (src, tgt, equal) in enumerate(self._inhibit):
                if all(m.matches(labels) for m in src):
                    key = tuple(labels.get(n, "") for n in equal)
                    self._sources[i].setdefault(key, {})[fp] = all(m.matches(labels) for m in tgt)
                    keys.append((i, key))
        for i, key in self._source_keys.pop(fp, ()):
            if (i, key) in keys:
                continue
            bucket = self._sources[i].get(key)
            if bucket is not None:
                bucket.pop(fp, None)
                self._sources_left = True  # some inhibited alert may be free now
                if not bucket:
                    del self._sources[i][key]
        if keys:
            self._source_keys[fp] = keys

    def _inhibitors(self, fp: str, labels: dict[str, str]) -> tuple[int, list[str]] | None:
        """(rule index, [source fingerprint]) of the first rule inhibiting the alert ``fp`` with
        ``labels``, or None. Alertmanager's rule: target side matches, a firing source with equal
        ``equal`` values exists, and when the alert matches the source side too, sources that also
        match the target side are skipped (so nothing inhibits itself)."""
        for i, (src, tgt, equal) in enumerate(self._inhibit):
            candidates = self._sources[i].get(tuple(labels.get(n, "") for n in equal))
            if not candidates or not all(m.matches(labels) for m in tgt):
                continue
            two_sided = all(m.matches(labels) for m in src)
            for sfp, both in candidates.items():
                if sfp != fp and not (two_sided and both):
                    return i, [sfp]
        return None
