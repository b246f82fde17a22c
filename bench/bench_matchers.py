"""What distinct matcher regexes cost in memory (``alerting/silence.py``),
as an API answering filters with new patterns sees them. Prints one JSON
object per way of compiling:

    {"bench": "matcher_memory", "way", "patterns", "rss_growth_mb", "cached_patterns",
     "cached_instructions"}

``way`` is ``plait`` (``alerting.silence.regex_hit``: the bounded cache of
compiled patterns) or ``re2.compile`` (the binding's own ``compile``, which
keeps the last 128 patterns it made, up to 8 MiB each). Each runs in a child
process of its own, so the two RSS figures start from the same place; the
patterns are ``--patterns`` distinct ``\\pL{n}`` (n = 100, 101, ...: ~120,000
RE2 instructions and more each), each matched once. The bound is the figure:
the growth of ``plait`` stays flat as ``--patterns`` grows, that of
``re2.compile`` grows until 128 patterns.

Usage: ``python bench/bench_matchers.py [--patterns 100]``
"""
from __future__ import annotations

import argparse
import json
import multiprocessing


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 1e6


def _run(way: str, n: int, out) -> None:
    import re2

    from alerting import silence

    before = _rss_mb()
    for i in range(n):
        pattern, value = f"\\pL{{150}}{i}", "\u00e9" * 150 + str(i)
        if way == "plait":
            assert silence.regex_hit(pattern, value)
        else:
            assert re2.compile(f"^(?:{pattern})$", silence._RE2_OPTIONS).match(value) is not None
    out.put({"bench": "matcher_memory", "way": way, "patterns": n,
             "rss_growth_mb": round(_rss_mb() - before, 1),
             "cached_patterns": len(silence._compiled),
             "cached_instructions": silence._compiled_size})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--patterns", type=int, default=100)
    args = ap.parse_args()
    ctx = multiprocessing.get_context("spawn")
    for way in ("re2.compile", "plait"):
        out = ctx.Queue()
        proc = ctx.Process(target=_run, args=(way, args.patterns, out))
        proc.start()
        print(json.dumps(out.get(timeout=600)), flush=True)
        proc.join()


if __name__ == "__main__":
    main()
