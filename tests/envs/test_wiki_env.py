"""WikiEnv over a ZIM built from the sample articles: the original observation strings,
scoring, give_up, snapshot/restore from blobs, bad input, bad ZIM paths."""

from __future__ import annotations

import hashlib
import json

import pytest

from envs.base import EnvError
from envs.wikipedia.env import NO_PAGE, WikiEnv
from envs.wikipedia.tasks import custom_task
from envs.wikipedia.zim import ZimBackend, build_zim, open_archive
from tests.mediawiki_server import SAMPLE_ARTICLES


class CountingBlobs:
    def __init__(self):
        self.data, self.puts, self.gets = {}, 0, 0

    def put_blob(self, data: bytes) -> str:
        self.puts += 1
        key = "b" + hashlib.sha256(data).hexdigest()[:32]
        self.data[key] = data
        return key

    def get_blob(self, key):
        self.gets += 1
        return self.data.get(key)


class CountingBackend:
    def __init__(self, inner):
        self.inner, self.calls, self.name = inner, 0, inner.name

    def search(self, entity):
        self.calls += 1
        return self.inner.search(entity)

    def close(self):
        pass


@pytest.fixture(scope="module")
def zim_path(tmp_path_factory):
    return build_zim(SAMPLE_ARTICLES, tmp_path_factory.mktemp("zim") / "sample.zim")


@pytest.fixture
def env(zim_path):
    e = WikiEnv("hotpotqa", ZimBackend(zim_path))
    e.reset(custom_task("hotpotqa", question="What is the range?", answer="1,800 to 7,000 ft"))
    return e


def test_reset_returns_task_text(env):
    t = custom_task("hotpotqa", question="Who?", answer="X")
    assert env.reset(t) == "Question: Who?" == t.text


def test_search_hit_gives_first_five_sentences(env):
    r = env.step("Search[Colorado orogeny]")
    assert not r.done and r.reward == 0
    assert r.observation == (
        "The Colorado orogeny was an episode of mountain building in Colorado and nearby areas. "
        "It took place during the Paleoproterozoic era. The orogeny built a chain of mountains along "
        "the southern edge of a craton.. The eastern sector extends into the High Plains and is called "
        "the Central Plains orogeny. The western sector reaches the Uinta range."
    )
    assert r.info == {"title": "Colorado orogeny"}


def test_search_is_case_tolerant_and_follows_redirects(env):
    a = env.step("search[colorado orogeny]").observation
    assert env.step("Search[Orogeny of Colorado]").observation == a
    assert env.step("search[Colorado_Orogeny]").observation == a


def test_lookup_walks_matches_then_no_more_results(env):
    env.step("Search[Colorado orogeny]")
    seen = [env.step("Lookup[eastern sector]").observation for _ in range(4)]
    assert seen == [
        "(Result 1 / 3) The eastern sector extends into the High Plains and is called the Central Plains orogeny.",
        "(Result 2 / 3) Rocks of the eastern sector are buried.",
        "(Result 3 / 3) Geologists study the eastern sector with drill cores..",
        "No more results.\n",
    ]
    # a new keyword restarts the count; case-insensitive
    assert env.step("lookup[GEOLOGY]").observation == "(Result 1 / 1) Geology of the state of Colorado."
    assert env.step("lookup[eastern sector]").observation.startswith("(Result 1 / 3)")


def test_list_items_are_searchable_lines(env):
    env.step("Search[Colorado orogeny]")
    assert (
        env.step("Lookup[Paleoproterozoic mountain]").observation
        == "(Result 1 / 1) Paleoproterozoic mountain building events."
    )
    # the >2-words rule applies to a whole list block (as the original), so a one-word item stays
    assert env.step("Lookup[Short]").observation == "(Result 1 / 1) Short."


def test_lookup_before_search_answers_as_the_original(env, zim_path):
    """The original WikiEnv builds an empty lookup list when no page is open and answers
    "No more results.\n" (147 steps of the notebooks' saved runs read exactly that)."""
    assert env.step("Lookup[anything]").observation == "No more results.\n"
    assert env.step("Lookup[anything]").observation == "No more results.\n"
    friendly = WikiEnv("hotpotqa", ZimBackend(zim_path), friendly_lookup=True)
    friendly.reset(env.task)
    assert friendly.step("Lookup[anything]").observation == NO_PAGE


@pytest.mark.parametrize(
    "raw,obs",
    [
        ("\n\nFinish[yes]", "Invalid action: Finish[yes]"),
        ("\n\nLookup[x]", "Invalid action: Lookup[x]"),
        (" Search[x]", "Invalid action: Search[x]"),
    ],
)
def test_action_is_lower_cased_then_stripped_as_the_notebooks(env, raw, obs):
    """The notebooks call `env.step(action[0].lower() + action[1:])` and WikiEnv.step strips:
    a completion whose action starts with a newline or space keeps its capital letter and
    is an invalid action there, so it is here."""
    r = env.step(raw)
    assert r.observation == obs and not r.done


def test_miss_and_disambiguation(env):
    r = env.step("Search[Nothing like this exists]")
    assert r.observation == "Could not find Nothing like this exists. Similar: []."
    r = env.step("Search[High Plains]")
    assert r.observation.startswith("Could not find [High Plains]. Similar: [")
    assert "'High Plains (United States)'" in r.observation
    # a miss keeps the previous page (as the original)
    env.step("Search[Colorado orogeny]")
    env.step("Search[zzzz qqqq]")
    assert env.step("Lookup[craton]").observation.startswith("(Result 1 / 1)")


def test_similar_titles_resolve_redirects(env):
    obs = env.step("Search[Milhouse]").observation
    assert obs == "Could not find Milhouse. Similar: ['Milhouse Example']."


def test_think_invalid_and_literal_backslash_cleanup(env):
    assert env.step("think[hmm]").observation == "Nice thought."
    assert env.step("Go north").observation == "Invalid action: go north"
    assert env.step("SEARCH[x]").observation == "Invalid action: sEARCH[x]"
    env.step("Search[Milhouse Example]")
    assert (
        env.step("Lookup[backslash]").observation
        == "(Result 1 / 1) Literal backslash sequences like ab should be cleaned from observations.."
    )


@pytest.mark.parametrize("entity", ["AT&T Tower", "C++ (language)", "東京タワー", "Tokyo Tower", "Opernhaus Zürich"])
def test_special_characters_and_unicode_resolve(env, entity):
    r = env.step(f"Search[{entity}]")
    assert not r.observation.startswith("Could not find"), r.observation
    assert "\\u" not in r.observation and "Ã" not in r.observation


def test_bad_entities(env):
    assert env.step("Search[]").observation.startswith("Search needs an entity")
    assert env.step("Search[   ]").observation.startswith("Search needs an entity")
    big = env.step("Search[" + "x" * 10_240 + "]").observation
    assert big.startswith("Could not find xxx") and len(big) < 400
    # brackets inside the entity are part of it, never a crash
    assert env.step("Search[High Plains [region]]").observation.startswith("Could not find High Plains [region].")
    assert env.step("Search[a|b#c]").observation.startswith("Could not find a|b#c.")


def test_finish_scores_em_and_f1_and_stays_done(env):
    r = env.step("Finish[1,800 to 7,000 ft]")
    assert r.done and r.reward == 1.0
    assert r.observation == "Episode finished, reward = 1\n"
    assert r.info == {"answer": "1,800 to 7,000 ft", "gold": "1,800 to 7,000 ft", "em": 1, "f1": 1.0}
    again = env.step("Search[Colorado orogeny]")
    assert again.done and again.observation == r.observation and again.reward == 0


def test_wrong_answer_and_give_up(env):
    r = env.step("finish[1,800 ft]")
    assert r.reward == 0 and r.info["em"] == 0 and 0 < r.info["f1"] < 1
    env.reset(env.task)
    g = env.give_up()
    assert g.done and g.reward == 0 and g.info["answer"] == "" and g.observation == "Episode finished, reward = 0\n"


def test_fever_label_scoring(zim_path):
    e = WikiEnv("fever", ZimBackend(zim_path))
    assert e.default_max_steps == 7  # the FEVER notebook loops range(1, 8)
    e.reset(custom_task("fever", claim="AT&T Tower has 12 floors.", label="refutes"))
    r = e.step("Finish[REFUTES]")
    assert r.reward == 1 and r.info == {"answer": "REFUTES", "gold": "REFUTES", "correct": True}
    e.reset(custom_task("fever", question="AT&T Tower has 12 floors.", answer="REFUTES"))
    assert e.step("Finish[SUPPORTS]").info["correct"] is False


def test_snapshot_is_small_and_restore_never_refetches(zim_path):
    blobs = CountingBlobs()
    backend = CountingBackend(ZimBackend(zim_path))
    task = custom_task("hotpotqa", question="Q", answer="A")
    e = WikiEnv("hotpotqa", backend, blobs)
    e.reset(task)
    e.step("Search[Colorado orogeny]")
    e.step("Lookup[eastern sector]")
    snap = e.snapshot()
    assert len(json.dumps(snap, separators=(",", ":"))) < 150
    assert snap["p"] in blobs.data and "eastern sector" == snap["k"] and snap["c"] == 1
    expected = [e.step("Lookup[eastern sector]").observation for _ in range(3)]

    fresh_backend = CountingBackend(ZimBackend(zim_path))
    f = WikiEnv("hotpotqa", fresh_backend, blobs)
    f.reset(task)
    f.restore(json.loads(json.dumps(snap)))
    assert [f.step("Lookup[eastern sector]").observation for _ in range(3)] == expected
    assert fresh_backend.calls == 0


def test_restore_with_long_keyword_and_answer_stays_small(env):
    env.step("Search[Colorado orogeny]")
    kw = "eastern " * 40
    env.step(f"Lookup[{kw}]")
    env.step("Finish[" + "long answer " * 30 + "]")
    snap = env.snapshot()
    assert len(json.dumps(snap, separators=(",", ":"))) < 150
    other = WikiEnv("hotpotqa", env.backend, env.blobs)
    other.reset(env.task)
    other.restore(snap)
    assert other.keyword == kw and other.answer == env.answer
    assert other.step("Search[x]").done


def test_restore_missing_blob_is_a_clear_error(env):
    env.step("Search[Colorado orogeny]")
    snap = env.snapshot()
    other = WikiEnv("hotpotqa", env.backend)  # its own empty memory store
    other.reset(env.task)
    with pytest.raises(EnvError, match="missing from the blob store"):
        other.restore(snap)


def test_state_tokens_rewind(env):
    env.step("Search[Colorado orogeny]")
    env.step("Lookup[eastern sector]")
    token = env.state()
    a = env.step("Lookup[eastern sector]").observation
    env.step("Search[High Plains (United States)]")
    env.set_state(token)
    assert env.step("Lookup[eastern sector]").observation == a


def test_missing_and_corrupt_zim_name_the_file(tmp_path):
    with pytest.raises(EnvError, match="nowhere.zim"):
        open_archive(tmp_path / "nowhere.zim")
    bad = tmp_path / "corrupt.zim"
    bad.write_bytes(b"ZIM\x04" + b"garbage" * 100)
    with pytest.raises(EnvError, match="corrupt.zim"):
        open_archive(bad)


def test_a_repeated_search_answers_as_the_first_and_each_caller_owns_its_outcome(zim_path):
    """ZIM searches are remembered per entity (a page is parsed once): a repeat gives the same
    outcome, and changing one caller's outcome changes no other's."""
    backend = ZimBackend(zim_path)
    for entity in ("Colorado orogeny", "Mercury", "Nonexistent thing xyz"):
        first = backend.search(entity)
        first.similar.append("changed by a caller")
        first.page = "changed"
        again = backend.search(entity)
        assert again.page != "changed" and "changed by a caller" not in again.similar
        assert again == ZimBackend(zim_path).search(entity)
