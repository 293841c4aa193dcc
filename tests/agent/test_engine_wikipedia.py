"""The real engine + SQLite store + scripted model on the Wikipedia families with the live
backend (local MediaWiki server): pages land in the blob table, resume uses the snapshot
and sends no HTTP request, the step limit scores `finish[]`."""

from __future__ import annotations

import pytest

from tests.mediawiki_server import SAMPLE_ARTICLES, MediaWikiServer
from trajectory.records import AgentConfig


@pytest.fixture
def setup(tmp_path, scripted_llm):
    from agent.engine import Engine
    from envs.wikipedia.tasks import custom_task
    from sessions.store import Store

    with MediaWikiServer(SAMPLE_ARTICLES) as wiki:
        store = Store(tmp_path / "w.db")
        engine = Engine(store, api_key="sk-test-key-not-real")
        task = custom_task("hotpotqa", question="What is the elevation range?", answer="1,800 to 7,000 ft")
        yield engine, store, wiki, scripted_llm, task
        store.close()


def cfg(llm, **kw):
    return AgentConfig(model="scripted-model", base_url=llm.base_url, max_retries=1, timeout_s=5, **kw)


def test_engine_run_resume_without_refetch(setup):
    engine, store, wiki, llm, task = setup
    llm.push(
        " I search it.\nAction 1: Search[Colorado orogeny]",
        " Look up.\nAction 2: Lookup[eastern sector]",
        " Again.\nAction 3: Lookup[eastern sector]",
    )
    ep, v = engine.start_episode(task, cfg(llm), {"wiki": "live", "wiki_url": wiki.api_url})
    engine.run(v.id, max_steps=2)
    steps = engine.steps(store.versions.get(v.id))
    assert steps[0].observation.startswith("The Colorado orogeny")
    assert steps[1].observation.startswith("(Result 1 / 3)")
    assert steps[1].snapshot and store.blobs.get(steps[1].snapshot["p"]).decode().startswith("The Colorado orogeny")
    engine.envs.forget_env(ep.id)  # as after a restart
    before = len(wiki.requests)
    engine.run(v.id, max_steps=1)
    steps = engine.steps(store.versions.get(v.id))
    assert steps[2].observation.startswith("(Result 2 / 3)")
    assert len(wiki.requests) == before


def test_step_limit_scores_empty_finish(setup):
    engine, store, wiki, llm, task = setup
    llm.push(" Search.\nAction 1: Search[High Plains (United States)]", " Again.\nAction 2: Lookup[wheat]")
    ep, v = engine.start_episode(task, cfg(llm, max_steps=2), {"wiki": "live", "wiki_url": wiki.api_url})
    engine.run(v.id)
    v = store.versions.get(v.id)
    assert v.outcome.done and v.outcome.reward == 0 and v.outcome.metrics.get("limit")


def test_each_wikipedia_task_family_gets_its_own_builtin_exemplars(tmp_path):
    from agent.engine import Engine
    from envs.registry import family
    from sessions.store import Store
    from trajectory.formats import FEVER_HEADER, HOTPOTQA_INSTRUCTION
    from trajectory.records import AgentConfig

    engine = Engine(Store(tmp_path / "p.db"))
    for kind in ("hotpotqa", "fever"):
        task = family(kind).list_tasks(source="builtin")[0]
        for style in ("react", "act"):
            ep, v = engine.start_episode(task, AgentConfig(style=style))
            prompt = engine.prompts.prompt(v.id)
            examples = prompt[: prompt.rindex(task.text)]
            if kind == "hotpotqa":
                assert prompt.startswith(HOTPOTQA_INSTRUCTION) and "Claim: " not in examples
            else:
                assert prompt.startswith(FEVER_HEADER) and "Question: " not in examples
                assert examples.count("Claim: ") == 3
            assert ("Thought 1:" in examples) == (style == "react")
