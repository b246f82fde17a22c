"""Funnel state of one ``alerts.funnel`` partition in a changelog-backed table, split into
entities so one event rewrites only what it touched:

- ``<p>|meta``: seqs, counters, silences, ``offset`` (last ``alerts.funnel`` offset applied) and
  ``src`` (last ``alerts.raw`` position per raw partition); ``silenced`` is rebuilt on load;
- ``<p>|ep|<fingerprint>``: one dedupe episode;
- ``<p>|fs|<fingerprint>``: one inhibition source of another partition (``labels``,
  ``expires_at``; :meth:`alerting.funnel.Funnel.take_source`);
- ``<p>|grp|<group id>``: a group's header; ``<p>|gm|<group id>|<fingerprint>``: one member (own
  place ``o``), so an alert rewrites its member, not the group;
- ``<p>|rcv|<receiver>``: bucket, message in flight (sections apart), outbox page numbers;
- ``<p>|inf|<receiver>|<message id>``: the in-flight message's sections, written once;
- ``<p>|ob|<receiver>|<n>``: outbox page n, at most :data:`PAGE_BYTES`;
- ``<p>|ck|<version>|<i>|<key>``: piece i of a value past one record (:mod:`alerting.chunks`).

Values are compact JSON bytes; a vanished entity is deleted (tombstone). The table is any
``MutableMapping[str, bytes]`` (Faust ``Table``, or a dict in tests). The ``offset`` is written
with the event's entities, so a replay after a crash is skipped; a crash inside that one
synchronous stretch is the only window where an event applies twice.
"""
from __future__ import annotations

import itertools
import json
import operator

import orjson
from typing import Any, Iterable, MutableMapping

from alerting import chunks
from alerting.config import AlertingConfig
from alerting.funnel import Funnel
from plait.records import MAX_RECORD_BYTES

_ENTITIES = {"episodes": "ep", "groups": "grp", "receivers": "rcv", "foreign": "fs"}
_KINDS = {v: k for k, v in _ENTITIES.items()}
#: Most bytes of one outbox page: one record less room for its key (bigger sections: chunks).
PAGE_BYTES = MAX_RECORD_BYTES - 1024


def _dumps(value: Any) -> bytes:
    """Compact JSON bytes (orjson: the funnel worker's hottest path), copied once
    (:func:`compact`)."""
    try:
        return compact(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS))
    except TypeError:  # a value orjson does not know: the stdlib's rules
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str).encode()


def _with_member(obj: bytes, name: str, value: bytes) -> bytes:
    """JSON object ``obj`` with member ``name`` = JSON ``value`` placed first (bytes; absent)."""
    member = orjson.dumps(name) + b":" + value
    return b"{" + member + (b"}" if obj == b"{}" else b"," + obj[1:])


def compact(data: bytes) -> bytes:
    """``data`` in a bytes object of its own size: ``orjson.dumps`` keeps its 4 KiB buffer behind a
    short value, and table values live as long as their entity."""
    return b"".join((data, b""))


class Changes:
    """Entities saves wrote since a reader (alert view, pending counter) last took them, so it
    redoes only those; ``everything`` is True until the first :meth:`take` (full walk)."""

    __slots__ = ("everything", "episodes", "groups")

    def __init__(self) -> None:
        self.everything = True
        self.episodes: set[str] = set()
        self.groups: set[str] = set()

    def take(self) -> tuple[set[str], set[str]] | None:
        """``(episode fps, group ids)`` written since the last take, or None (walk all); resets."""
        out = None if self.everything else (self.episodes, self.groups)
        self.everything, self.episodes, self.groups = False, set(), set()
        return out


def _as_bytes(raw: Any) -> bytes:
    """A stored value as JSON bytes (the changelog may give str back)."""
    if isinstance(raw, (bytes, bytearray, memoryview)):
        return bytes(raw)
    if isinstance(raw, str):
        return raw.encode()
    return _dumps(raw)


class PartitionState:
    """The funnel of ``alerts.funnel`` partition ``partition``, persisted in ``table``."""

    def __init__(self, partition: int, table: MutableMapping[str, bytes],
                 config: AlertingConfig) -> None:
        self.partition = partition
        self.table = table
        self.config = config
        self.prefix = f"{partition}|"
        self._written: dict[str, bytes] = {}
        #: key -> the piece keys its stored head names (values past one record)
        self._pieces: dict[str, list[str]] = {}
        self._piece_start = f"{self.prefix}{chunks.PIECE_KIND}|"
        #: receiver -> its outbox as last written: [[page number, [section]]]
        self._layout: dict[str, list[list]] = {}
        #: id(section) -> (section, its "merged" flag, its JSON bytes), queued sections only
        self._sections: dict[int, tuple[dict, bool, bytes]] = {}
        #: outbox page key -> the section bytes it was last written from
        self._parts: dict[str, list[bytes]] = {}
        #: receiver -> (its in-flight message's sections, their JSON bytes)
        self._inflight: dict[str, tuple[list, bytes]] = {}
        #: receiver -> the key its in-flight message's sections were last written at
        self._inf_keys: dict[str, str] = {}
        #: keys :meth:`save` writes before the others (sections before their header)
        self._early: list[str] = []
        #: receiver -> {page number: bytes of that page, at most} (:meth:`_paginate`)
        self._sizes: dict[str, dict[int, int]] = {}
        #: receiver -> its outbox as last saved (:meth:`_shifted`)
        self._flat: dict[str, list[dict]] = {}
        #: receiver -> [(queued section saved unmerged, its page number)]
        self._unmerged: dict[str, list[tuple[dict, int]]] = {}
        self.offset = -1
        self.src: dict[str, list[int]] = {}
        #: reader name -> what saves wrote since it last looked (:meth:`watch`)
        self._watches: dict[str, Changes] = {}
        self.funnel = self._load()

    def watch(self, reader: str) -> Changes:
        """The :class:`Changes` of ``reader`` (new on first use and per reload)."""
        ch = self._watches.get(reader)
        if ch is None:
            ch = self._watches[reader] = Changes()
        return ch

    # ------------------------------------------------------------------ load
    def _load(self) -> Funnel:
        state: dict[str, Any] | None = None
        parts: dict[str, dict[str, Any]] = {k: {} for k in _ENTITIES}
        members: dict[str, dict[str, Any]] = {}
        pages: dict[str, dict[int, list]] = {}
        inflight: dict[str, list] = {}  # key -> the sections of a message in flight
        keys = [k for k in list(self.table.keys()) if isinstance(k, str) and k.startswith(self.prefix)]
        pieces = {k for k in keys if k.startswith(self._piece_start)}
        for key in keys:
            if key in pieces:
                continue
            raw = self._read(key)
            if raw is None:
                continue
            self._written[key] = raw
            value = json.loads(raw)
            rest = key[len(self.prefix):]
            if rest == "meta":
                state = value["state"]
                self.offset = value["offset"]
                self.src = value.get("src", {})
                continue
            kind, _, ident = rest.partition("|")
            if kind == "inf":
                inflight[key] = value
                continue
            if kind == "ob":
                name, _, page = ident.rpartition("|")
                pages.setdefault(name, {})[int(page)] = value
                continue
            if kind == "gm":
                gid, _, fp = ident.partition("|")
                members.setdefault(gid, {})[fp] = value
            elif kind in _KINDS:
                parts[_KINDS[kind]][ident] = value
        for gid, group in parts["groups"].items():
            found = members.get(gid, {})
            order = group.pop("member_order", None)  # state from before members kept "o"
            if order is None:
                order = sorted(found, key=lambda fp: found[fp].get("o", 0))
            group["members"] = {fp: found[fp] for fp in order if fp in found}
        for name, rs in parts["receivers"].items():
            inf = rs.get("inflight")
            if inf is not None and "sections" not in inf:  # stored apart (older state: inside)
                key = self._inf_keys[name] = f"{self.prefix}inf|{name}|{inf['id']}"
                if key not in inflight:
                    raise ValueError(f"table value {key!r} (the sections of the message in "
                                     f"flight of {name!r}) is missing")
                inf["sections"] = inflight.pop(key)
            n = rs.pop("outbox_pages", None)
            if n is not None:  # a list of page numbers (an int n: pages 0..n-1, older state)
                got = pages.get(name, {})
                numbers = list(range(n)) if isinstance(n, int) else list(n)
                layout = [[i, list(got.get(i, []))] for i in numbers]
                rs["outbox"] = [s for _i, page in layout for s in page]
                self._layout[name] = layout
        if state is not None:
            state.update(parts)
        # pieces or sections nothing names: a save a crash cut short
        for key in pieces - {k for ks in self._pieces.values() for k in ks}:
            del self.table[key]
        for key in inflight:
            del self.table[key]
            self._written.pop(key, None)
            for pk in self._pieces.pop(key, ()):
                del self.table[pk]
        return Funnel(self.config, state)

    def _read(self, key: str) -> bytes | None:
        """``key``'s value as JSON bytes, joined from its pieces; None when absent. Raises
        ValueError for a head whose pieces are missing or corrupt."""
        raw = self.table.get(key)
        if raw is None:
            return None
        raw = _as_bytes(raw)
        if chunks.is_head(raw):
            self._pieces[key] = chunks.piece_keys(self.prefix, key, raw)
            return chunks.join_value(self.table, self.prefix, key, raw)
        return raw

    def stale(self) -> bool:
        """True when the table holds a newer image (another worker owned the partition)."""
        raw = self.table.get(self.prefix + "meta")
        if raw is not None and chunks.is_head(_as_bytes(raw)):
            raw = self._read(self.prefix + "meta")
        return raw is not None and json.loads(_as_bytes(raw))["offset"] != self.offset

    # --------------------------------------------------------------- replays
    def seen(self, offset: int) -> bool:
        """True when ``alerts.funnel`` offset ``offset`` was already applied."""
        return offset <= self.offset

    def seen_raw(self, raw_partition: int | None, raw_offset: int | None, index: int,
                 copy: int = 0, receiver: str | None = None) -> bool:
        """True when raw alert (partition, offset, index) reached this funnel before (a router
        replay). The watermark is per (raw partition, ``receiver``): receivers share partitions."""
        if raw_partition is None or raw_offset is None:
            return False
        last = self.src.get(self._src_key(raw_partition, receiver))
        if last is None and receiver is not None:
            last = self.src.get(str(raw_partition))  # state from before per-receiver marks
        return last is not None and [raw_offset, index, copy] <= (list(last) + [0])[:3]

    def mark_raw(self, raw_partition: int | None, raw_offset: int | None, index: int,
                 copy: int = 0, receiver: str | None = None) -> None:
        """Remember the last raw position applied (see :meth:`seen_raw`)."""
        if raw_partition is not None and raw_offset is not None:
            self.src[self._src_key(raw_partition, receiver)] = [raw_offset, index, copy]

    @staticmethod
    def _src_key(raw_partition: int, receiver: str | None) -> str:
        return str(raw_partition) if receiver is None else f"{raw_partition}|{receiver}"

    # ------------------------------------------------------------------ save
    def _group_entities(self, gid: str, group: dict[str, Any]) -> dict[str, Any]:
        """The group's header (members apart, in place ``o``) and its members."""
        out = {self.key("grp", gid): self._group_head(group)}
        for fp, member in group.get("members", {}).items():
            out[self.member_key(gid, fp)] = member
        return out

    @staticmethod
    def _group_head(group: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in group.items() if k != "members"}

    def _section_bytes(self, sec: dict[str, Any]) -> bytes:
        """A queued section's JSON bytes, serialized once (only ``merged`` changes)."""
        got = self._sections.get(id(sec))
        if got is not None and got[0] is sec and got[1] == sec["merged"]:
            return got[2]
        data = _dumps(sec)
        self._sections[id(sec)] = (sec, sec["merged"], data)
        return data

    def _receiver_entities(self, name: str, rs: dict[str, Any]) -> dict[str, Any]:
        """The receiver's header plus its outbox pages (None: delete). Pages hold at most
        :data:`PAGE_BYTES` and keep their number while their sections stay queued, so a save
        writes what changed (:meth:`_shifted`), else pages are compared or written afresh."""
        outbox = rs.get("outbox", [])
        old, flat = self._layout.get(name, []), self._flat.get(name, [])
        shifted = self._shifted(name, old, outbox)
        if shifted is not None:
            layout, dirty, taken = shifted
            left, stay = flat[:taken], outbox[len(flat) - taken:]  # stay: the added sections
        else:
            left, stay = flat, outbox
            self._sizes.pop(name, None)  # pages may be renumbered: sizes are measured again
            layout = self._relayout(old, outbox) or self._paginate([], outbox, 0)
            dirty = None
        old_pages = {n: secs for n, secs in old}
        out: dict[str, Any] = {}
        for n, secs in layout:
            old_pages.pop(n, None)
            key = f"{self.prefix}ob|{name}|{n}"
            if dirty is not None and n not in dirty and key in self._written:
                out[key] = self._written[key]  # unchanged, known without looking
                continue
            parts = [self._section_bytes(sec) for sec in secs]
            before = self._parts.get(key)
            if (before is not None and key in self._written and len(before) == len(parts)
                    and all(a is b for a, b in zip(before, parts))):
                out[key] = self._written[key]  # unchanged (same sections, same bytes)
            else:
                out[key] = b"[" + b",".join(parts) + b"]"
                self._parts[key] = parts
        for n in old_pages:
            out[f"{self.prefix}ob|{name}|{n}"] = None
            self._parts.pop(f"{self.prefix}ob|{name}|{n}", None)
            self._sizes.get(name, {}).pop(n, None)
        self._layout[name] = layout
        self._flat[name] = list(outbox)
        if dirty is None:  # sections whose bytes may still change (their merged flag)
            self._unmerged[name] = [(sec, n) for n, secs in layout for sec in secs if not sec["merged"]]
        # sections that left the outbox (sent, merged, unqueued) leave the cache with their alerts
        stay_ids = {id(sec) for sec in stay}
        for sec in left:
            if id(sec) not in stay_ids:
                self._sections.pop(id(sec), None)
        if len(self._sections) > 2 * sum(len(r.get("outbox", [])) for r in
                                          self.funnel.state["receivers"].values()) + 1024:
            # a receiver gone from the state (reload) keeps its last sections here: drop them
            live = {id(sec) for r in self.funnel.state["receivers"].values() for sec in r.get("outbox", [])}
            self._sections = {k: v for k, v in self._sections.items() if k in live}
        head = {k: v for k, v in rs.items() if k not in ("outbox", "inflight")}
        head["outbox_pages"] = [n for n, _ in layout]
        out[self.key("rcv", name)] = self._receiver_head(name, head, rs.get("inflight"), out)
        return out

    def _shifted(self, name: str, old: list[list], outbox: list[dict]
                 ) -> tuple[list[list], set[int], int] | None:
        """New page layout, changed page numbers and the number of sections taken from the front
        when ``outbox`` is the last one with sections taken from the front and added at the end;
        None otherwise. Costs what moved."""
        flat = self._flat.get(name)
        if flat is None or name not in self._layout:
            return None
        first = outbox[0] if outbox else None
        k = 0
        while k < len(flat) and flat[k] is not first:
            k += 1
        kept = len(flat) - k
        if len(outbox) < kept or not all(map(operator.is_, itertools.islice(flat, k, None), outbox)):
            return None
        layout, dirty, drop = [], set(), k
        for n, secs in old:
            if drop >= len(secs):
                drop -= len(secs)
                continue
            if drop:
                secs, drop = secs[drop:], 0
                dirty.add(n)
            layout.append([n, secs])
        unmerged = []
        live = {n for n, _ in layout}
        for sec, n in self._unmerged.get(name, ()):
            if n in live and sec["merged"]:
                dirty.add(n)  # its merged flag flipped (alerting.outbox.wait)
            elif n in live:
                unmerged.append((sec, n))
        added = outbox[kept:]
        if added:
            if layout:
                dirty.add(layout[-1][0])
                layout[-1][1] = list(layout[-1][1])
            nxt = max((n for n, _ in old), default=-1) + 1
            before = {n for n, _ in layout}
            layout = self._paginate(layout, added, nxt, name)
            dirty |= {n for n, _ in layout if n not in before}
            where = {id(sec): n for n, secs in layout[-(len(layout) - len(before) + 1):] for sec in secs}
            unmerged += [(sec, where[id(sec)]) for sec in added if not sec["merged"]]
        self._unmerged[name] = unmerged
        return layout, dirty, k

    def _receiver_head(self, name: str, head: dict[str, Any], inf: dict[str, Any] | None,
                       out: dict[str, Any]) -> bytes:
        """A receiver's header; its in-flight sections go to ``out`` as ``<p>|inf|<receiver>|<id>``
        (None: delete the previous), written once per message as they do not change. Sections are
        written before the header and old ones deleted after (:meth:`save`), so a header read back
        always finds its sections."""
        old = self._inf_keys.pop(name, None)
        if inf is None:
            self._inflight.pop(name, None)
            if old is not None:
                out[old] = None
            return _dumps(head | {"inflight": None})
        got = self._inflight.get(name)
        if got is None or got[0] is not inf["sections"]:
            got = self._inflight[name] = (inf["sections"], _dumps(inf["sections"]))
        key = self._inf_keys[name] = f"{self.prefix}inf|{name}|{inf['id']}"
        if old is not None and old != key:
            out[old] = None
        out[key] = got[1]
        self._early.append(key)
        return _with_member(_dumps(head), "inflight",
                            _dumps({k: v for k, v in inf.items() if k != "sections"}))

    def _relayout(self, old: list[list], outbox: list[dict]) -> list[list] | None:
        """Page layout when ``outbox`` is the old one with sections taken anywhere and new ones at
        the end; None when the order changed otherwise."""
        where = {id(sec): i for i, sec in enumerate(outbox)}
        kept, last = 0, -1
        for _n, secs in old:
            for sec in secs:
                i = where.get(id(sec))
                if i is None:
                    continue
                if i != last + 1:
                    return None
                last = i
                kept += 1
        layout = []
        for n, secs in old:
            left = [sec for sec in secs if id(sec) in where]
            if left:
                layout.append([n, left])
        nxt = max((n for n, _ in old), default=-1) + 1
        return self._paginate(layout, outbox[kept:], nxt)

    def _paginate(self, layout: list[list], sections: list[dict], nxt: int,
                  name: str | None = None) -> list[list]:
        """Add ``sections`` to the last page within :data:`PAGE_BYTES`, then to pages from ``nxt``
        (receiver ``name``'s last page size is an upper bound)."""
        size = PAGE_BYTES
        if layout:
            size = self._sizes.get(name, {}).get(layout[-1][0]) if name is not None else None
            if size is None:
                size = sum(len(self._section_bytes(sec)) + 1 for sec in layout[-1][1])
        for sec in sections:
            n = len(self._section_bytes(sec)) + 1
            if size + n > PAGE_BYTES:
                layout.append([nxt, []])
                nxt += 1
                size = 0
            layout[-1][1].append(sec)
            size += n
        if name is not None and layout:
            self._sizes.setdefault(name, {})[layout[-1][0]] = size
        return layout

    def _entities(self, only: Iterable[str] | None) -> dict[str, Any]:
        st = self.funnel.state
        out: dict[str, Any] = {}
        if only is None:
            for name, kind in _ENTITIES.items():
                for ident, value in st[name].items():
                    if kind == "grp":
                        out |= self._group_entities(ident, value)
                    elif kind == "rcv":
                        out |= self._receiver_entities(ident, value)
                    else:
                        out[f"{self.prefix}{kind}|{ident}"] = value
            return out
        for key in only:
            kind, _, ident = key[len(self.prefix):].partition("|")
            if kind == "gm":
                gid, _, fp = ident.partition("|")
                member = st["groups"].get(gid, {}).get("members", {}).get(fp)
                if member is not None:
                    out[key] = member
                continue
            if kind in ("rcv", "ob"):
                rname = ident if kind == "rcv" else ident.rpartition("|")[0]
                rs = st["receivers"].get(rname)
                if rs is not None:
                    out |= self._receiver_entities(rname, rs)
                continue
            value = st[_KINDS[kind]].get(ident)
            if value is not None:
                out[key] = self._group_head(value) if kind == "grp" else value
        return out

    def _note(self, keys: list[str]) -> None:
        """Tell every :meth:`watch` reader about the table ``keys`` written."""
        eps, gids, n = set(), set(), len(self.prefix)
        for key in keys:
            kind, _, ident = key[n:].partition("|")
            if kind == "ep":
                eps.add(ident)
            elif kind == "grp":
                gids.add(ident)
            elif kind == "gm":
                gids.add(ident.partition("|")[0])
        for ch in self._watches.values():
            if not ch.everything:
                ch.episodes |= eps
                ch.groups |= gids

    def member_key(self, gid: str, fp: str) -> str:
        """Table key of the member ``fp`` of group ``gid``."""
        return f"{self.prefix}gm|{gid}|{fp}"

    def key(self, kind: str, ident: str) -> str:
        """Table key of entity ``kind`` (``ep``, ``grp``, ``rcv``) ``ident``."""
        return f"{self.prefix}{kind}|{ident}"

    def save(self, offset: int, touched: Iterable[str] | None = None) -> int:
        """Persist what changed after ``alerts.funnel`` offset ``offset``; ``touched``: keys the
        event may have changed (None: compare all, for silence commands). Returns the number of sets
        and deletes, meta included."""
        touched = None if touched is None else set(touched)
        current = self._entities(touched)
        candidates = set(self._written) - {self.prefix + "meta"} if touched is None else touched
        writes, done, gone = 0, [], []
        early, self._early = self._early, []
        for key in itertools.chain([k for k in early if current.get(k) is not None],
                                   candidates | set(current)):
            value = current.get(key)
            if value is not None:
                data = value if isinstance(value, bytes) else _dumps(value)
                if self._written.get(key) is not data and self._written.get(key) != data:
                    self._put(key, data, gone)
                    self._written[key] = data
                    writes += 1
                    done.append(key)
            elif key in self._written:
                done.append(key)
        # deletes after every set: old pieces go only once their new head is written
        for key in done:
            if current.get(key) is None:
                del self.table[key]
                del self._written[key]
                gone += self._pieces.pop(key, ())
                writes += 1
        if self._watches and done:
            self._note(done)
        self.offset = offset
        # ``silenced`` is rebuilt from the episodes on load, not kept in meta
        meta = {k: v for k, v in self.funnel.state.items() if k not in _ENTITIES and k != "silenced"}
        data = _dumps({"offset": offset, "src": self.src, "state": meta})
        for key in gone:
            del self.table[key]
        gone = []
        self._put(self.prefix + "meta", data, gone)  # last: the offset marks the save done
        self._written[self.prefix + "meta"] = data
        for key in gone:
            del self.table[key]
        return writes + 1

    def _put(self, key: str, data: bytes, gone: list[str]) -> None:
        """Store ``data`` at ``key``, in pieces then head when past one record; the replaced pieces
        go to ``gone``, deleted after this write (docs/kafka-rules.md #17)."""
        gone += self._pieces.pop(key, ())
        if chunks.fits(key, data):
            self.table[key] = data
            return
        head, pieces = chunks.split_value(self.prefix, key, data)
        for pk, part in pieces:
            self.table[pk] = part
        self.table[key] = head
        self._pieces[key] = [pk for pk, _ in pieces]
