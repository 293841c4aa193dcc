"""Live MediaWiki backend against the local fake Action API server (127.0.0.1):
request budget, politeness headers, encoding, faults, resume without refetching, and
parity with a ZIM of the same articles."""

from __future__ import annotations

import json

import pytest

from envs.wikipedia.env import WikiEnv
from envs.wikipedia.live import LiveBackend
from envs.wikipedia.tasks import custom_task
from envs.wikipedia.zim import ZimBackend, build_zim
from tests.mediawiki_server import SAMPLE_ARTICLES, Fault, MediaWikiServer

PARITY_ACTIONS = [
    "Lookup[eastern]",
    "Search[Colorado orogeny]",
    "Lookup[eastern sector]",
    "Lookup[eastern sector]",
    "Lookup[eastern sector]",
    "Lookup[eastern sector]",
    "Lookup[geology]",
    "search[colorado orogeny]",
    "Search[Colorado_Orogeny]",
    "Search[Orogeny of Colorado]",
    "Search[High Plains]",
    "Search[High Plains (United States)]",
    "Lookup[wheat]",
    "Search[high plains (australia)]",
    "Search[Opernhaus Zürich]",
    "Search[Zürich Opera House]",
    "Lookup[façade]",
    "Search[AT&T Tower]",
    "Search[A&T Tower]",
    "Search[C++ (language)]",
    "Search[Tokyo Tower]",
    "Search[東京タワー]",
    "Lookup[333]",
    "Search[Milhouse]",
    "Search[Milhouse Example]",
    "Lookup[named after]",
    "Lookup[backslash]",
    "Search[Foo#bar]",
    "Search[a|b]",
    "Search[x+y]",
    "Search[High Plains [region]]",
    "Search[]",
    "Search[nothing matches this]",
    "Search[" + "long " * 2000 + "]",
    "think[hmm]",
    "jump",
    "Finish[Tokyo Tower]",
    "Search[after the end]",
]


@pytest.fixture(scope="module")
def wiki():
    with MediaWikiServer(SAMPLE_ARTICLES) as server:
        yield server


@pytest.fixture
def server(wiki):
    wiki.reset()
    return wiki


@pytest.fixture(scope="module")
def zim_path(tmp_path_factory):
    return build_zim(SAMPLE_ARTICLES, tmp_path_factory.mktemp("zim") / "parity.zim")


def live_env(server, kind="hotpotqa", **kw):
    e = WikiEnv(kind, LiveBackend(server.api_url, retries=kw.pop("retries", 2), timeout=kw.pop("timeout", 5.0), **kw))
    e.reset(custom_task(kind, question="Which is taller?", answer="Tokyo Tower"))
    return e


def test_parity_with_zim_for_every_action(server, zim_path):
    live = live_env(server)
    offline = WikiEnv("hotpotqa", ZimBackend(zim_path))
    offline.reset(live.task)
    for action in PARITY_ACTIONS:
        a, b = live.step(action), offline.step(action)
        assert a.observation == b.observation, action
        assert (a.done, a.reward) == (b.done, b.reward)


def test_at_most_three_requests_per_search_and_none_per_lookup(server):
    env = live_env(server)
    for entity in ("Colorado orogeny", "High Plains", "nothing matches", "Tokyo Tower", "Foo#bar"):
        before = len(server.requests)
        env.step(f"Search[{entity}]")
        assert 1 <= len(server.requests) - before <= 3, entity
    env.step("Search[Colorado orogeny]")
    before = len(server.requests)
    for _ in range(4):
        env.step("Lookup[eastern sector]")
    assert len(server.requests) == before


def test_user_agent_gzip_and_encoding(server):
    env = live_env(server)
    obs = env.step("Search[AT&T Tower]").observation
    assert obs.startswith("AT&T Tower is a fictional office tower")
    req = server.requests[0]
    assert req.params["titles"].split("\x1f")[1] == "AT&T Tower"  # '&' arrived intact
    assert req.headers["User-Agent"].startswith("react-editor/") and "http" in req.headers["User-Agent"]
    assert req.gzipped
    env.step("Search[東京タワー]")
    assert any(r.params.get("titles", "").endswith("東京タワー") for r in server.requests)
    env.step("Search[x+y #1 | z]")
    assert server.requests[-1].params["srsearch"] == "x+y #1 | z"


def test_429_with_retry_after_is_retried(server):
    env = live_env(server)
    server.push_fault(Fault(status=429, retry_after=0))
    obs = env.step("Search[Colorado orogeny]").observation
    assert obs.startswith("The Colorado orogeny")
    assert len(server.requests) == 3  # 429, query, parse


def test_retry_after_is_honoured(server):
    backend = LiveBackend(server.api_url, retries=1, timeout=5)
    server.push_fault(Fault(status=503, retry_after="0.3"))
    backend.search("Colorado orogeny")
    first, second = server.requests[0], server.requests[1]
    assert second.at - first.at >= 0.28


@pytest.mark.parametrize(
    "fault,expected",
    [
        (Fault(status=500), "HTTP 500"),
        (Fault(status=429, retry_after=0), "HTTP 429"),
        (Fault(status=200, body=b"{not json"), "broken JSON"),
        (Fault(status=200, body=b"<html>maintenance</html>"), "broken JSON"),
        (Fault(delay_s=0.6), "timed out"),
    ],
)
def test_failures_keep_the_episode_alive_and_can_be_retried(server, fault, expected):
    env = live_env(server, retries=1, timeout=0.3)
    env.step("Search[Colorado orogeny]")
    env.step("Lookup[eastern sector]")
    server.push_fault(fault, fault)
    r = env.step("Search[High Plains (United States)]")
    assert r.observation.startswith("Search failed:") and expected in r.observation
    assert r.observation.endswith("Try again.")
    assert not r.done and expected in r.info["error"]
    # the episode survives: the old page and lookup cursor are intact, and a retry works
    assert env.step("Lookup[eastern sector]").observation.startswith("(Result 2 / 3)")
    assert env.step("Search[High Plains (United States)]").observation.startswith("The High Plains are")


def test_api_error_payload_is_a_failed_search(server):
    env = live_env(server, retries=0)
    server.push_fault(
        Fault(status=200, body=json.dumps({"error": {"code": "internal_api_error", "info": "boom"}}).encode())
    )
    r = env.step("Search[Colorado orogeny]")
    assert "internal_api_error" in r.info["error"] and r.observation.startswith("Search failed:")


def test_resume_makes_no_requests(server):
    env = live_env(server)
    env.step("Search[Colorado orogeny]")
    env.step("Lookup[eastern sector]")
    snap = env.snapshot()
    fresh = WikiEnv("hotpotqa", LiveBackend(server.api_url), env.blobs)
    fresh.reset(env.task)
    before = len(server.requests)
    fresh.restore(snap)
    assert fresh.step("Lookup[eastern sector]").observation.startswith("(Result 2 / 3)")
    assert len(server.requests) == before
