"""Silence stage (Alertmanager's silences and MuteStage), and the marks of muted episodes."""
from __future__ import annotations

from typing import Any

from alerting.group import apply_verdict
from alerting.model import Alert, LedgerEntry, Outcome
from alerting.silence import Silence, create_silence, end_now, silenced_by
from alerting.stages.base import StageBase


class Silences(StageBase):
    """Silences of one funnel and the muted episodes' marks."""

    def start(self) -> None:
        if "silenced" not in self.state:  # the store keeps it in the episodes only
            self.state["silenced"] = {fp: ep["silenced_by"] for fp, ep in self.state["episodes"].items()
                                      if ep.get("silenced_by")}
        self._silences = [Silence.from_dict(s) for s in self.state["silences"].values()]

    def _silence_alert(self, fp: str, verdict: str, ep: dict[str, Any] | None,
                       labels: dict[str, str], rid: str, now: float) -> LedgerEntry | None:
        """The ``silenced`` entry of an alert an active silence matches, else None."""
        sid = silenced_by(self._silences, labels, now) if self._silences else None
        if sid is None:
            return None
        self._muted_alert(fp, verdict, ep, "silenced_by", sid, now)
        return self._final(rid, Outcome.SILENCED, now, fp=fp, silence_id=sid)

    def add_silence(self, spec: dict[str, Any], now: float, silence_id: str | None = None) -> Silence:
        """Create a silence from an API request (keys: :func:`alerting.silence.create_silence`). A
        known ``silence_id`` (default ``s<n>``) is replaced: the agents broadcast one id to every
        partition, and a command applied twice leaves one silence.

        Raises:
            SilenceRefused: naming the bad key (broad matchers without ``allow_broad``, missing
                author or comment, bad times...).
        """
        self.state["seq"]["silence"] += 1
        silence = create_silence(spec, now, silence_id or f"s{self.state['seq']['silence']}")
        self.state["silences"][silence.id] = silence.to_dict()
        self._silences = [s for s in self._silences if s.id != silence.id] + [silence]
        return silence

    def expire_silence(self, silence_id: str, now: float) -> bool:
        """End a silence at ``now`` (Alertmanager's expire); False if unknown."""
        d = self.state["silences"].get(silence_id)
        if d is None:
            return False
        end_now(d, now)
        self._silences = [Silence.from_dict(s) for s in self.state["silences"].values()]
        return True

    def silences(self) -> list[Silence]:
        """Every known silence (active, pending or expired)."""
        return list(self._silences)

    def _muted_alert(self, fp: str, verdict: str, ep: dict | None, key: str, by: Any,
                     now: float) -> None:
        """A muted episode (``key`` ``silenced_by``/``inhibited_by``, ``by`` silence id/source
        fps): a firing one is marked; a resolved one ends (told to its group if grouped)."""
        st = self.state
        if ep is None:
            return
        if ep["status"] == "resolved":
            self._unmute(fp, ep)
            if ep["group"] is None or ep["group"] not in st["groups"]:
                st["episodes"].pop(fp, None)  # began and ended unseen: nothing to tell
            elif verdict == "resolved":
                apply_verdict(st["groups"][ep["group"]], "resolved", ep, None, now)
            return
        self._mark(fp, ep, key, by)

    def _mark(self, fp: str, ep: dict[str, Any], key: str, by: Any) -> None:
        """Mark a firing episode with ``key``, clearing the other mark."""
        if key == "inhibited_by":
            if ep.get("silenced_by"):
                ep["silenced_by"] = None
                self.state["silenced"].pop(fp, None)
            ep["inhibited_by"] = by
            self._inhibited.add(fp)
        else:
            if ep.get("inhibited_by"):
                ep["inhibited_by"] = None
                self._inhibited.discard(fp)
            ep["silenced_by"] = by
            self.state["silenced"][fp] = by

    def _unmute(self, fp: str, ep: dict[str, Any] | None) -> None:
        """Clear both marks of an episode (it passed, resolved or ended)."""
        if ep is not None:
            if ep.get("silenced_by"):
                ep["silenced_by"] = None
            if ep.get("inhibited_by"):
                ep["inhibited_by"] = None
        self.state["silenced"].pop(fp, None)
        self._inhibited.discard(fp)

    def _release_muted(self, now: float) -> None:
        """Firing episodes no longer silenced or inhibited join their group as new (Alertmanager
        releases an inhibited alert when its source resolves)."""
        st = self.state
        recheck = [f for f in self._inhibited if f not in st["silenced"]] if self._sources_left else []
        self._sources_left = False
        for fp in list(st["silenced"]) + recheck:
            ep = st["episodes"].get(fp)
            if ep is None or ep["status"] != "firing":
                self._unmute(fp, ep)
                continue
            labels = Alert.from_dict(ep["alert"]).match_labels()
            inhibited = self._inhibitors(fp, labels) if self._inhibit else None
            if inhibited is not None:
                if ep.get("inhibited_by") != inhibited[1]:
                    self._mark(fp, ep, "inhibited_by", inhibited[1])
                continue
            still = silenced_by(self._silences, labels, now) if self._silences else None
            if still is not None:
                if ep.get("silenced_by") != still:
                    self._mark(fp, ep, "silenced_by", still)
                continue
            self._unmute(fp, ep)
            # Alertmanager groups a muted alert on receipt: its group's timer has run since, so the
            # release goes out at that timer's next flush
            g = self._group_for(ep, min(now, ep["started_at"]))
            self._touch(g, (fp,))
            apply_verdict(g, "release", ep, None, now)

    def _muter(self, now: float):
        """``muted(member)`` for :func:`alerting.group.build_sections`: ``(key, by)`` or None;
        inhibition first (Alertmanager's order)."""
        def muted(m: dict[str, Any]):
            labels = Alert.from_dict(m["alert"]).match_labels()
            if self._inhibit:
                inhibited = self._inhibitors(m["fp"], labels)
                if inhibited is not None:
                    return "inhibited_by", inhibited
            sid = silenced_by(self._silences, labels, now) if self._silences else None
            return ("silenced_by", sid) if sid is not None else None
        return muted
