"""Handing memory a worker freed back to the OS (glibc ``malloc_trim``), and when to.

A worker's allocator keeps what a large export or an alert storm freed: glibc returns only the
free space at the top of its heap on its own, so a worker that held 50,000 open alerts, or the
last file's peak, stays at that size after they are gone (docs/perf-notes.md, "Writer worker
peak RSS" and "Worker RSS after a storm resolves")."""
from __future__ import annotations

import functools
import sys
import threading


def release_freed_memory() -> bool:
    """Blocking: hand the memory this process freed back to the OS (glibc ``malloc_trim(0)``:
    free pages anywhere in the heap, not only at its top). Run off the event loop: it holds the
    malloc lock while it walks the heap (~60 ms after a 20,000-alert storm). Returns whether
    memory was released; False without glibc. pymalloc's arenas (small objects) are not glibc's
    to give back: an arena with one live object stays."""
    trim = _malloc_trim()
    return bool(trim is not None and trim(0))


def release_in_background() -> None:
    """:func:`release_freed_memory` in a daemon thread of its own: the caller does not wait."""
    threading.Thread(target=release_freed_memory, name="malloc-trim", daemon=True).start()


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim``, or None (not Linux, or another libc)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes
    import ctypes.util

    try:
        trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


class TrimAfterShrink:
    """When a process that held many entities (open alerts) should release what their going
    freed: once the count fell to at most half its high-water mark since the last release, by at
    least ``min_freed``. So 50,000 alerts resolving 1,000 a batch release 4 times (25,000,
    12,000, 6,000 and 1,000 left), not per batch; a steady churn never does.

    ``observe(count) -> bool``: True when memory should be released now (the mark then restarts
    at ``count``)."""

    def __init__(self, min_freed: int = 5_000) -> None:
        self.min_freed = min_freed
        self.peak = 0

    def observe(self, count: int) -> bool:
        if count > self.peak:
            self.peak = count
            return False
        if self.peak - count >= self.min_freed and count <= self.peak // 2:
            self.peak = count
            return True
        return False
