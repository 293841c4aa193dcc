"""The benchmarks' bulk database: 5,000 ALFWorld episodes, each a 30-step version and a
branch at step 15 with 15 new steps (10,000 versions of 30 steps), one model call per
model step, written through the Store API. Imported before _root (see there)."""

from __future__ import annotations

from pathlib import Path

STEPS = 30
BRANCH_AT = 15


def build(db: Path, episodes: int) -> None:
    from sessions.store import Store
    from trajectory.records import AgentConfig, ModelCall, Step, Task, Usage

    store = Store(db)
    config = AgentConfig(model="bench-model", base_url="http://127.0.0.1:1/v1")
    room = (
        "You are in the middle of a room. Looking quickly around you, you see a cabinet 6, a cabinet 5, "
        "a cabinet 4, a cabinet 3, a cabinet 2, a cabinet 1, a countertop 1, a drawer 1, and a fridge 1."
    )

    def steps(ep: int, start: int, n: int, tag: str) -> tuple[list[Step], list[ModelCall]]:
        out, calls = [], []
        for i in range(start, start + n):
            calls.append(
                ModelCall(
                    model="bench-model",
                    api_style="completions",
                    params={"temperature": 0.0, "stop": ["\n"]},
                    prompt_hash=f"{ep:08d}{i:04d}{tag}",
                    prompt_chars=4000 + 40 * i,
                    completion=f" go to cabinet {i % 6 + 1}",
                    latency_ms=412.5,
                    usage=Usage(prompt_tokens=1000 + 10 * i, completion_tokens=6),
                )
            )
            if i % 3 == 1:
                out.append(
                    Step(
                        index=i,
                        thought=f"I need to check cabinet {i % 6 + 1} for the mug ({tag}).",
                        observation="OK.",
                        source="human" if tag == "b" else "model",
                        call_ids=[-len(calls)],
                    )
                )
            else:
                out.append(
                    Step(
                        index=i,
                        action=f"go to cabinet {i % 6 + 1}",
                        observation=f"The cabinet {i % 6 + 1} is open. In it, you see a cup {i}, a plate 2, "
                        f"and a spoon 1. ({tag} {ep})",
                        info={"won": False},
                        call_ids=[-len(calls)],
                    )
                )
        return out, calls

    batch = 500
    for start in range(0, episodes, batch):
        with store.transaction():
            for ep_n in range(start, min(start + batch, episodes)):
                task = Task(
                    env="alfworld",
                    id=f"bench/{ep_n}",
                    type="pick_and_place_simple",
                    text=room + f"\nYour task is to: put a mug {ep_n} in fridge.",
                )
                ep, v = store.episodes.create(task, config, {"wording": "paper"})
                s1, c1 = steps(ep_n, 1, STEPS, "a")
                rows, v = store.versions.append(v.id, s1, c1)
                s2, c2 = steps(ep_n, BRANCH_AT + 1, STEPS - BRANCH_AT, "b")
                v2, _ = store.versions.branch(v, at_step=rows[BRANCH_AT - 1], steps=[])
                store.versions.append(v2.id, s2, c2)
    store.close()
