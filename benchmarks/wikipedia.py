"""Wikipedia environment speed (issue 5). Prints one JSON object last:

search_p50_ms                 search[...] on the built-in ZIM (hits, misses, disambiguations)
lookup_p50_us                 lookup[...] on an open page (new keywords and repeats)
live_requests_per_search_max  HTTP requests per search, live backend vs the local MediaWiki server
requests_on_resume            HTTP requests while restoring a snapshot and looking up again

  python benchmarks/wikipedia.py [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import _root  # noqa: E402, F401  (puts the repo root on sys.path; see _root.py)

from envs.wikipedia.builtin import builtin_zim, load_articles  # noqa: E402
from envs.wikipedia.env import WikiEnv  # noqa: E402
from envs.wikipedia.live import LiveBackend  # noqa: E402
from envs.wikipedia.tasks import custom_task  # noqa: E402
from envs.wikipedia.zim import ZimBackend  # noqa: E402
from tests.mediawiki_server import MediaWikiServer  # noqa: E402


def entities(articles: list[dict]) -> list[str]:
    out = [a["title"] for a in articles]
    out += [r for a in articles for r in a.get("redirects", [])]
    out += [a["title"].lower() for a in articles[:10]]
    out += ["Nothing by this name", "Lantern", "harbour town", "x" * 400]
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()

    articles = load_articles()
    task = custom_task("hotpotqa", question="benchmark", answer="x")
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        zim = builtin_zim(cache=Path(tmp))
        build_s = time.perf_counter() - t0

        env = WikiEnv("hotpotqa", ZimBackend(zim))
        env.reset(task)
        names = entities(articles)
        for n in names:  # warm up libzim caches
            env.step(f"Search[{n}]")
        search_ns = []
        for _ in range(args.rounds):
            for n in names:
                t = time.perf_counter_ns()
                env.step(f"Search[{n}]")
                search_ns.append(time.perf_counter_ns() - t)

        lookup_ns = []
        words = ["the", "was", "in", "of", "and", "founded", "river", "born", "zzz", "19"]
        for a in articles:
            env.step(f"Search[{a['title']}]")
            for _ in range(args.rounds):
                for w in words:
                    for _rep in range(2):  # a new keyword, then the next result
                        t = time.perf_counter_ns()
                        env.step(f"Lookup[{w}]")
                        lookup_ns.append(time.perf_counter_ns() - t)
                env.step("Lookup[reset]")

        with MediaWikiServer(articles, zim_path=zim) as server:
            live = WikiEnv("hotpotqa", LiveBackend(server.api_url), None)
            live.reset(task)
            per_search = []
            for n in names:
                before = len(server.requests)
                live.step(f"Search[{n}]")
                per_search.append(len(server.requests) - before)
            live.step(f"Search[{articles[0]['title']}]")
            live.step("Lookup[the]")
            snap = live.snapshot()
            before = len(server.requests)
            resumed = WikiEnv("hotpotqa", LiveBackend(server.api_url), live.blobs)
            resumed.reset(task)
            resumed.restore(snap)
            resumed.step("Lookup[the]")
            resumed.step("Lookup[was]")
            on_resume = len(server.requests) - before

    result = {
        "search_p50_ms": round(statistics.median(search_ns) / 1e6, 4),
        "search_p95_ms": round(sorted(search_ns)[int(len(search_ns) * 0.95)] / 1e6, 4),
        "lookup_p50_us": round(statistics.median(lookup_ns) / 1e3, 2),
        "lookup_p95_us": round(sorted(lookup_ns)[int(len(lookup_ns) * 0.95)] / 1e3, 2),
        "live_requests_per_search_max": max(per_search),
        "requests_on_resume": on_resume,
        "zim_build_s": round(build_s, 3),
        "articles": len(articles),
        "searches": len(search_ns),
        "lookups": len(lookup_ns),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
