"""The store the training-export tests read (not a fixture): every part of the version tree the
dpo / kto / steps / chat-sft records come from, made through the engine and the store API."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sessions import annotations, experiments
from sessions.rollouts import RolloutEdit
from tests.engine_scripts import WIKI_SCRIPT
from tests.export_support import ROOM_SCRIPT, cfg
from tests.toy_envs import ROOM_TASK, WIKI_TASK
from trajectory.records import AgentConfig, Outcome, Step, Task, ToolCall

HINT = "The capital Marrowgate was founded in 1650."
TOOLS_TASK = Task(env="alfworld", id="toy/tools-1", type="pick_and_place_simple", text=ROOM_TASK.text)


def wiki_responder(body):
    """The model's continuation of any Wikipedia prompt: a wrong answer, unless a person wrote
    the thought (then the right one)."""
    prompt = body["prompt"]
    i = int(re.findall(r"(?:Thought|Action) (\d+):", prompt)[-1])
    if prompt.endswith(f"Action {i}:"):  # the action for a person's thought
        return " Finish[1650]"
    return f" So the answer is 1712.\nAction {i}: Finish[1712]"


@dataclass
class Made:
    room: dict = field(default_factory=dict)  # name -> version
    wiki: dict = field(default_factory=dict)
    tools: dict = field(default_factory=dict)
    episodes: dict = field(default_factory=dict)  # "room" | "wiki" | "tools" -> episode id
    groups: dict = field(default_factory=dict)


def build(toy) -> Made:
    """ALFWorld (paper format): edits of the four kinds, two judged by two people (a preference
    and a majority), one with no evidence; Wikipedia (paper format): a what-if proving a person's
    thought edit, a suggestion accepted as an action edit whose outcome is worse; a `tools`-style
    episode with stored tool calls and reasoning, judged; verdicts and step tags; an experiment
    that evaluates the Wikipedia task."""
    from agent.rollouts import Request, whatif

    m, eng, store = Made(), toy.engine, toy.store
    # ---- ALFWorld, paper format
    toy.llm.push(*ROOM_SCRIPT)
    ep, v1 = eng.start_episode(ROOM_TASK, cfg(toy.llm), name="room")
    eng.run(v1.id)
    m.episodes["room"] = ep.id
    rt = eng.editor.edit(v1.id, 1, "rewrite_thought", "First find the mug: cabinets first.", keep_rest=True)
    it = eng.editor.edit(v1.id, 3, "insert_thought", "The mug may be in the cabinet.", keep_rest=True)
    dt = eng.editor.edit(v1.id, 1, "delete_thought", None, keep_rest=True)
    toy.llm.push(" go to table 1")
    ra = eng.editor.edit(v1.id, 2, "rewrite_action", "go to shelf 1")
    eng.run(ra.id, max_steps=1)
    m.room.update(
        v1=store.versions.get(v1.id),
        rewrite_thought=store.versions.get(rt.id),
        insert_thought=store.versions.get(it.id),
        delete_thought=store.versions.get(dt.id),
        rewrite_action=store.versions.get(ra.id),
    )
    annotations.annotate_version(store, rt.id, by="alice", verdict="failure")  # kto: the verdict beats the outcome
    steps = store.versions.steps(v1.id)
    annotations.tag_step(store, steps[1].id, by="bob", add=["hallucinated"])
    annotations.tag_step(store, steps[0].id, by="bob", add=["good_subgoal"])
    # ---- Wikipedia, paper format: a what-if proves a thought edit; a suggestion accepted
    toy.llm.push(*WIKI_SCRIPT)
    ew, vw = eng.start_episode(WIKI_TASK, cfg(toy.llm))
    assert eng.run(vw.id).success
    m.episodes["wiki"] = ew.id
    toy.llm.set_responder(wiki_responder)
    effect, _ = whatif(
        eng, Request(vw.id, 2, 4, 0.5, None, edit=RolloutEdit(kind="rewrite_thought", text=HINT)), concurrency=1
    )
    m.groups["thought"] = (effect.control.group.id, effect.treatment.group.id)
    fixed = eng.editor.edit(vw.id, 2, "rewrite_thought", HINT)
    eng.run(fixed.id)
    effect2, _ = whatif(
        eng,
        Request(vw.id, 4, 2, 0.5, None, edit=RolloutEdit(kind="rewrite_action", text="Finish[1712]")),
        concurrency=1,
    )
    m.groups["action"] = (effect2.control.group.id, effect2.treatment.group.id)
    origin = {
        "suggestion": 1,
        "candidate": 1,
        "critic_model": "critic-x",
        "critic_prompt": "default",
        "critic_prompt_hash": "0" * 16,
        "whatif_groups": list(m.groups["action"]),
        "verdict": "not shown",
        "leaks_answer": False,
    }  # as agent.suggest.accept records an accepted candidate
    sug = eng.editor.edit(vw.id, 4, "rewrite_action", "Finish[1712]", origin=origin)
    m.wiki.update(
        v1=store.versions.get(vw.id), fixed=store.versions.get(fixed.id), suggested=store.versions.get(sug.id)
    )
    # ---- a tools-style episode (stored tool calls and reasoning), two branches judged
    cfg_tools = AgentConfig(model="scripted-model", api_style="tools")
    et, t1 = store.episodes.create(TOOLS_TASK, cfg_tools, {})
    m.episodes["tools"] = et.id

    def call_step(i, cmd, obs, reasoning=None):
        return Step(
            index=i,
            thought=f"I go: {cmd}.",
            action=cmd,
            observation=obs,
            reasoning=reasoning,
            tool_call=ToolCall(id=f"call_t{i}{cmd[-1]}", name="act", arguments={"command": cmd}),
        )

    rows, t1 = store.versions.append(
        t1.id,
        [
            call_step(1, "go to cabinet 1", "The cabinet 1 is closed.", "Mugs hide."),
            call_step(2, "open cabinet 1", "You see a mug 1."),
        ],
        outcome=Outcome(done=True, success=True, reward=1.0),
    )
    t2, _ = store.versions.branch(t1, at_step=rows[0], steps=[call_step(2, "go to table 1", "Nothing.")])
    store.versions.update(t2.id, outcome=Outcome(done=True, success=False))
    m.tools.update(v1=store.versions.get(t1.id), v2=store.versions.get(t2.id))
    # ---- judgments by two people (last: a judged version never changes again)
    j = store.judgments
    j.add(v1.id, rt.id, "B", "alice", "the new thought plans better")
    j.add(rt.id, v1.id, "A", "bob")  # the same preference, asked the other way round
    j.add(v1.id, it.id, "A", "alice")
    j.add(v1.id, it.id, "tie", "bob")  # one for the original, one tie: the original
    j.add(t1.id, t2.id, "A", "alice")
    experiments.create(store, name="heldout", env="hotpotqa", method="react", config=cfg(toy.llm), tasks=[WIKI_TASK])
    return m
