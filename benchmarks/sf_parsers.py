"""The IETF RateLimit fields: the built-in structured-field parser against http-sf.

Run: ``python benchmarks/sf_parsers.py`` (needs ``pip install http-sf``). Prints, per field
value, the best of 15 runs of 20,000 parses for each parser, in CPU microseconds per parse
(process time, so other load on the machine counts less).
"""

from __future__ import annotations

import time
import timeit
from functools import partial

import http_sf

from retrybudget.core.headers._structured import _sf_parse

VALUES = [
    ('"default";r=50;t=30', False),
    ('"burst";q=100;w=60,"daily";q=1000;w=86400', False),
    ("limit=100, remaining=50, reset=5", True),
    ("100;w=10", False),
]


def main() -> None:
    """Print the comparison table."""
    n = 20_000
    print("| value | built-in (µs) | http-sf (µs) | http-sf / built-in |")
    print("| --- | --- | --- | --- |")
    for text, dictionary in VALUES:
        raw = text.encode()
        kind = "dictionary" if dictionary else "list"
        ours = min(timeit.repeat(partial(_sf_parse, text, dictionary=dictionary),
                                 number=n, repeat=15, timer=time.process_time)) / n * 1e6
        theirs = min(timeit.repeat(partial(http_sf.parse, raw, tltype=kind),
                                   number=n, repeat=15, timer=time.process_time)) / n * 1e6
        print(f"| `{text}` | {ours:.2f} | {theirs:.2f} | {theirs / ours:.2f} |")


if __name__ == "__main__":
    main()
