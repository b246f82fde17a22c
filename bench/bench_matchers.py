"""What distinct matcher regexes cost in memory (``alerting/matchers.py``),
as an API answering filters with new patterns sees them. Prints one JSON
object per way of compiling:

    {"bench": "matcher_memory", "way", "patterns", "values", "rss_growth_mb"}

Each pattern is a filter of its own, ``[ab]*a[ab]{16}|z<i>`` (i = 0, 1,
...), matched against ``--values`` random a/b strings of 8,192 characters:
a pattern whose DFA grows with the values it meets, toward RE2's 8 MiB
``max_mem``. ``way`` is ``plait`` (``alerting.matchers.parse_matcher``, then
``Matcher.matches``; the matcher is dropped after, as a request drops its
filters) or ``re2.compile`` (the binding's own ``compile``, which keeps the
last 128 patterns it made). Each runs in a child process of its own, so the
two RSS figures start from the same place. The figure is the growth as
``--patterns`` grows: flat for ``plait``, growing until 128 patterns for
``re2.compile``.

Usage: ``python bench/bench_matchers.py [--patterns 200] [--values 10]``
"""
from __future__ import annotations

import argparse
import json
import multiprocessing


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 1e6


def _run(way: str, n: int, values: int, out) -> None:
    import random

    import re2

    from alerting import matchers

    rnd = random.Random(7)
    texts = ["".join(rnd.choice("ab") for _ in range(8192)) for _ in range(values)]
    before = _rss_mb()
    for i in range(n):
        pattern = f"[ab]*a[ab]{{16}}|z{i}"
        if way == "plait":
            m = matchers.parse_matcher({"name": "x", "value": pattern, "isRegex": True})
            hits = sum(m.matches({"x": t}) for t in texts)
        else:
            rx = re2.compile(f"^(?:{pattern})$", matchers.RE2_OPTIONS)
            hits = sum(rx.match(t) is not None for t in texts)
        assert hits == sum(t[-17] == "a" for t in texts)
    out.put({"bench": "matcher_memory", "way": way, "patterns": n, "values": values,
             "rss_growth_mb": round(_rss_mb() - before, 1)})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--patterns", type=int, default=200)
    ap.add_argument("--values", type=int, default=10)
    args = ap.parse_args()
    ctx = multiprocessing.get_context("spawn")
    for way in ("re2.compile", "plait"):
        out = ctx.Queue()
        proc = ctx.Process(target=_run, args=(way, args.patterns, args.values, out))
        proc.start()
        print(json.dumps(out.get(timeout=600)), flush=True)
        proc.join()


if __name__ == "__main__":
    main()
