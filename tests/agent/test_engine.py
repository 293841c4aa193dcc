"""The ReAct engine through the real openai client and a scripted model server:
prompts byte-identical to the notebooks' algorithm, the paper's fallback, malformed output,
and model errors that lose nothing."""

from __future__ import annotations

import pytest

from agent.engine import EngineError, ModelCallFailed
from tests.engine_scripts import ROOM_SCRIPT, WIKI_SCRIPT, cfg
from tests.scripted_server import Reply
from tests.toy_envs import ROOM_EXEMPLARS, ROOM_TASK, WIKI_EXEMPLARS, WIKI_TASK, ToyRoom, ToyWiki

HOTPOT_INSTRUCTION = """Solve a question answering task with interleaving Thought, Action, Observation steps. Thought can reason about the current situation, and Action can be three types: 
(1) Search[entity], which searches the exact entity on Wikipedia and returns the first paragraph if it exists. If not, it will return some similar entities to search.
(2) Lookup[keyword], which returns the next sentence containing keyword in the current passage.
(3) Finish[answer], which returns the answer and finishes the task.
Here are some examples.
"""


def notebook_alfworld(completions: list[str], d: dict, v: str, ob: str) -> list[str]:
    """alfworld.ipynb's `alfworld_run`, verbatim in its logic; returns the prompts it sends."""
    env = ToyRoom()
    env.reset(ROOM_TASK)
    prompt = (
        "Interact with a household to solve a task. Here are two examples.\n"
        + d[f"react_{v}_1"]
        + d[f"react_{v}_0"]
        + "\nHere is the task.\n"
    )
    init_prompt = prompt + ob + "\n>"
    prompt = ""
    sent = []
    for i, completion in enumerate(completions, 1):
        sent.append(init_prompt + prompt)
        action = completion.strip()
        res = env.step(action)
        observation = res.observation
        if action.startswith("think:"):
            observation = "OK."
        prompt += f" {action}\n{observation}\n>"
        if res.done:
            break
    return sent


def test_alfworld_run_sends_the_notebook_prompts_and_wins(toy):
    toy.llm.push(*ROOM_SCRIPT)
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    report = toy.engine.run(v.id)
    assert report.done and report.success and report.steps == 6 and report.error is None
    sent = [r.body["prompt"] for r in toy.llm.completion_requests]
    assert sent == notebook_alfworld(ROOM_SCRIPT, ROOM_EXEMPLARS, "put", ROOM_TASK.text)
    assert all(r.body["stop"] == ["\n"] for r in toy.llm.completion_requests)
    steps = toy.store.versions.steps(v.id)
    assert (
        steps[0].thought == "To solve the task, I need to find a mug, then put it in table 1."
        and steps[0].action is None
    )
    assert steps[0].observation == "OK."
    assert [s.action for s in steps[1:]] == [c.strip() for c in ROOM_SCRIPT[1:]]
    calls = toy.store.calls.read(steps[1].call_ids)
    assert calls[0].usage.prompt_tokens is not None and calls[0].completion == " go to cabinet 1"
    assert toy.store.versions.get(v.id).outcome.success is True


def notebook_webthink(replies: list[str], question: str, examples: str) -> list[tuple[str, list[str]]]:
    """hotpotqa.ipynb's `webthink`, in its logic; returns (prompt, stop) per llm call."""
    env = ToyWiki()
    env.reset(WIKI_TASK)
    sent: list[tuple[str, list[str]]] = []
    replies = list(replies)

    def llm(prompt, stop):
        sent.append((prompt, stop))
        text = replies.pop(0)
        for s in stop:
            if s in text:
                text = text[: text.index(s)]
        return text

    prompt = HOTPOT_INSTRUCTION + examples + question + "\n"
    for i in range(1, 8):
        thought_action = llm(prompt + f"Thought {i}:", stop=[f"\nObservation {i}:"])
        try:
            thought, action = thought_action.strip().split(f"\nAction {i}: ")
        except ValueError:
            thought = thought_action.strip().split("\n")[0]
            action = llm(prompt + f"Thought {i}: {thought}\nAction {i}:", stop=["\n"]).strip()
        res = env.step(action[0].lower() + action[1:])
        obs = res.observation.replace("\\n", "")
        prompt += f"Thought {i}: {thought}\nAction {i}: {action}\nObservation {i}: {obs}\n"
        if res.done:
            break
    return sent


def test_wiki_react_matches_notebook_incl_fallback(toy):
    toy.llm.push(*WIKI_SCRIPT)
    ep, v = toy.engine.start_episode(WIKI_TASK, cfg(toy.llm))
    report = toy.engine.run(v.id)
    assert report.done and report.success, report
    got = [(r.body["prompt"], r.body["stop"]) for r in toy.llm.completion_requests]
    assert got == notebook_webthink(WIKI_SCRIPT, WIKI_TASK.text, WIKI_EXEMPLARS["webthink_simple6"])
    steps = toy.store.versions.steps(v.id)
    assert [s.action for s in steps] == ["Search[Velmora]", "Search[Marrowgate]", "Lookup[founded]", "Finish[1650]"]
    assert steps[1].thought == "The capital is Marrowgate. I need to look it up."
    calls = toy.store.calls.read(steps[1].call_ids)
    assert [c.purpose for c in calls] == ["step", "action_fallback"]
    assert steps[2].observation == "(Result 1 / 1) The town was founded in 1650."
    assert toy.store.versions.get(v.id).outcome.metrics["em"] == 1.0


def test_wiki_act_style_cues_action(toy):
    toy.llm.push(" Search[Velmora]", " Finish[1650]")
    ep, v = toy.engine.start_episode(WIKI_TASK, cfg(toy.llm, style="act"))
    toy.engine.run(v.id)
    reqs = toy.llm.completion_requests
    assert (
        reqs[0].body["prompt"] == HOTPOT_INSTRUCTION + WIKI_EXEMPLARS["webact_simple6"] + WIKI_TASK.text + "\nAction 1:"
    )
    assert (
        reqs[1]
        .body["prompt"]
        .endswith(
            "Observation 1: Velmora is a province. Its capital is Marrowgate. Velmora was founded in 1712.\nAction 2:"
        )
    )
    assert [s.thought for s in toy.store.versions.steps(v.id)] == [None, None]


@pytest.mark.parametrize(
    "completion, expected_obs",
    [
        (" " + "x" * 5000, "Invalid action: " + "x" * 5000),
        (" Ünïcödé ⟨search⟩ 検索", "Invalid action: Ünïcödé ⟨search⟩ 検索"),
        (" <script>alert(1)</script>", "Invalid action: <script>alert(1)</script>"),
    ],
)
def test_malformed_completions_end_as_invalid_action(toy, completion, expected_obs):
    toy.llm.push(Reply(text=completion), "")  # then the fallback call (no action) answers empty too
    ep, v = toy.engine.start_episode(WIKI_TASK, cfg(toy.llm, style="act"))
    rep = toy.engine.step(v.id)
    assert rep.steps[0].observation == expected_obs
    assert not rep.done


def test_model_error_loses_nothing_and_can_be_retried(toy, monkeypatch):
    from agent.model import retries

    monkeypatch.setattr(retries, "BACKOFF_BASE_S", 0.01)  # the attempts are tested, not their waits (3 s)
    toy.llm.push(*ROOM_SCRIPT[:2])
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.engine.run(v.id, max_steps=2)
    before = toy.store.versions.steps(v.id)
    toy.llm.push(Reply(status=500), Reply(status=500), Reply(status=500))
    with pytest.raises(ModelCallFailed) as err:
        toy.engine.step(v.id)
    assert "500" in str(err.value)
    assert toy.store.versions.steps(v.id) == before
    failed = toy.store.calls.of_episode(ep.id)[-1]
    assert failed.error and failed.attempts == 3
    assert toy.store.versions.get(v.id).error
    toy.llm.push(ROOM_SCRIPT[2])
    rep = toy.engine.step(v.id)  # retry works and clears the error
    assert rep.steps[0].action == "open cabinet 1" and toy.store.versions.get(v.id).error is None


def test_run_report_carries_error_and_stops(toy):
    toy.llm.push(ROOM_SCRIPT[0], Reply(status=401, message="bad key"))
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    report = toy.engine.run(v.id)
    assert report.error and report.steps == 1 and not report.done


def test_step_limit_scores_like_the_notebook(toy):
    toy.llm.push(" Search[Velmora]", " Search[Velmora]")
    ep, v = toy.engine.start_episode(WIKI_TASK, cfg(toy.llm, style="act", max_steps=2))
    report = toy.engine.run(v.id)
    assert report.done and report.success is False and report.steps == 2
    oc = toy.store.versions.get(v.id).outcome
    assert oc.metrics["limit"] is True and oc.metrics["answer"] == ""
    with pytest.raises(EngineError, match="finished"):
        toy.engine.step(v.id)


def test_should_stop_stops_between_steps(toy):
    toy.llm.push(*ROOM_SCRIPT)
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    seen = []
    report = toy.engine.run(v.id, on_step=seen.append, should_stop=lambda: len(seen) >= 2)
    assert report.stopped and report.steps == 2 and toy.store.versions.get(v.id).status == "stopped"


def test_chat_style_puts_transcript_in_one_user_message(toy):
    toy.llm.push("> go to cabinet 1")  # chat models echo the cue; it is dropped
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, api_style="chat"))
    rep = toy.engine.step(v.id)
    req = toy.llm.completion_requests[0]
    assert req.path.endswith("/chat/completions")
    msgs = req.body["messages"]
    assert len(msgs) == 1 and msgs[0]["role"] == "user"
    assert msgs[0]["content"].startswith(toy.engine.prompts.prompt(v.id)[:200])
    assert rep.steps[0].action == "go to cabinet 1"


def test_human_steps_write_turns_without_a_model(toy):
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    rep = toy.engine.human_step(v.id, thought="The mug is likely in cabinet 1.", action="go to cabinet 1")
    assert [(s.thought, s.action, s.observation, s.source) for s in rep.steps] == [
        ("The mug is likely in cabinet 1.", None, "OK.", "human"),
        (None, "go to cabinet 1", "The cabinet 1 is closed.", "human"),
    ]
    assert toy.llm.requests == []
    with pytest.raises(EngineError, match="empty"):
        toy.engine.editor.edit(v.id, 1, "rewrite_thought", "   ")


def test_prompt_is_pure_function_of_inputs(toy):
    toy.llm.push(*ROOM_SCRIPT[:3])
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.engine.run(v.id, max_steps=3)
    p1 = toy.engine.prompts.prompt(v.id)
    from agent.engine import Engine

    fresh = Engine(toy.store)  # a new process would compute the same text
    assert fresh.prompts.prompt(v.id) == p1
    assert p1.endswith("> open cabinet 1\nYou open the cabinet 1. The cabinet 1 is open. In it, you see a mug 1.\n>")


def test_response_cache_is_the_call_log(toy):
    toy.llm.push(ROOM_SCRIPT[0], ROOM_SCRIPT[1])
    ep1, v1 = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.engine.step(v1.id)
    ep2, v2 = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    rep = toy.engine.step(v2.id)  # the identical temperature-0 request is answered locally
    assert len(toy.llm.completion_requests) == 1
    assert rep.calls[0].cached and rep.steps[0].thought == toy.store.versions.steps(v1.id)[0].thought
    assert toy.store.calls.read(rep.steps[0].call_ids)[0].cached is True
    ep3, v3 = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, cache=False))
    toy.engine.step(v3.id)  # cache off: asks the server
    assert len(toy.llm.completion_requests) == 2
    ep4, v4 = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, temperature=0.7))
    toy.llm.push(ROOM_SCRIPT[0])
    toy.engine.step(v4.id)  # sampling is never cached
    assert len(toy.llm.completion_requests) == 3
    assert toy.store.calls.clear_cache() >= 1
    ep5, v5 = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.llm.push(ROOM_SCRIPT[0])
    toy.engine.step(v5.id)
    assert len(toy.llm.completion_requests) == 4
