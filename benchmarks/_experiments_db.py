"""The UI benchmark's experiments database: N experiments x M HotpotQA tasks, each task an
episode with a short finished version (a few model steps with their model calls), written
through the library's store API (agent.experiment.create, store.episodes.create, store.versions.append,
sessions.experiments.ensure_episode/record_item) - no model is run. Imported before _root."""

from __future__ import annotations

from pathlib import Path

STEPS = 4


def build(db: Path, experiments: int, tasks: int) -> None:
    import sessions.experiments
    from agent import experiment
    from sessions.store import Store
    from trajectory.records import AgentConfig, ModelCall, Outcome, Step, Task, Usage

    store = Store(db)
    cfg = AgentConfig(model="bench-model", base_url="http://127.0.0.1:1/v1")
    task_list = [
        Task(
            env="hotpotqa",
            id=f"bench-{i:04d}",
            type=("bridge", "comparison")[i % 2],
            text=f"Question: Which town was bench person {i} born in?",
            gold=f"Town {i}",
        )
        for i in range(tasks)
    ]
    for x in range(experiments):
        exp = experiment.create(store, env="hotpotqa", method="react", config=cfg, tasks=task_list, name=f"bench {x}")
        with store.transaction():
            for n, it in enumerate(sessions.experiments.items(store, exp.id)):
                ep_id, _ = sessions.experiments.ensure_episode(store, it.id, exp.config, {}, None)
                v = store.episodes.get(ep_id).current_version
                steps, calls = [], []
                for i in range(1, STEPS + 1):
                    calls.append(
                        ModelCall(
                            model="bench-model",
                            api_style="completions",
                            prompt_hash=f"{x}-{n}-{i}",
                            prompt_chars=3000 + 50 * i,
                            completion=f" Thought {i}",
                            latency_ms=300.0,
                            usage=Usage(prompt_tokens=900 + 10 * i, completion_tokens=20),
                        )
                    )
                    last = i == STEPS
                    steps.append(
                        Step(
                            index=i,
                            thought=f"I need to search person {n}.",
                            action=f"Finish[Town {n if (n + x) % 3 else n + 1}]" if last else f"Search[Person {n}]",
                            observation="Episode finished, reward = 1" if last else f"Person {n} was born in Town {n}.",
                            done=last,
                            call_ids=[-len(calls)],
                        )
                    )
                store.versions.append(v, steps, calls)
                ok = bool((n + x) % 3)
                store.versions.update(v, outcome=Outcome(done=True, success=ok, reward=float(ok)))
                sessions.experiments.record_item(
                    store,
                    it.id,
                    status="done",
                    version_id=v,
                    success=ok,
                    metrics={"answer": f"Town {n}", "em": float(ok), "f1": 1.0 if ok else 0.5},
                )
        sessions.experiments.set_status(store, exp.id, "done", add_wall_s=60.0)
    store.close()
