"""Issue 44: a rollout group stores its counts (finished among its first N, successes), kept by
the store's triggers whatever changes them, so a page reads one row per group. Each state here
is compared with the counts worked out from the members' own records."""

from __future__ import annotations

from sessions import rollouts
from sessions.store import Store
from trajectory.records import AgentConfig, Outcome, Step, Task

CONFIG = AgentConfig(model="m", base_url="http://127.0.0.1:1/v1", temperature=0.7)


def _from_records(store: Store, group_id: int) -> tuple[int, int]:
    g = rollouts.group(store, group_id)
    outcomes = [store.versions.get(v).outcome for pos, v in g.members.items() if pos < g.n]
    done = [o for o in outcomes if o.done]
    return len(done), sum(1 for o in done if o.success)


def test_stored_counts_follow_members_outcomes_n_and_continuations(tmp_path):
    store = Store(tmp_path / "c.db")
    ep, v = store.episodes.create(Task(env="hotpotqa", id="q", text="Question?"), CONFIG, {})
    rows, v = store.versions.append(v.id, [Step(index=1, thought="Think.", action="Search[A]", observation="A.")], [])
    g = rollouts.open_group(store, episode_id=ep.id, source_version=v.id, step=2, kind="resample", n=5, config=CONFIG)

    def check(expected: tuple[int, int]) -> None:
        assert rollouts.finished_counts(store, ep.id) == {g.id: expected} == {g.id: _from_records(store, g.id)}

    check((0, 0))
    members = []
    for pos in range(6):  # one more than N: the sixth is not counted
        child, _ = store.versions.branch(v, at_step=rows[0], steps=[])
        rollouts.add_member(store, g.id, pos, child.id)
        members.append(child.id)
    check((0, 0))
    for pos, vid in enumerate(members):
        store.versions.update(vid, outcome=Outcome(done=pos != 1, success=pos in (0, 2, 5)))
    check((4, 2))  # positions 0, 2, 3, 4 finished (1 did not); 0 and 2 succeeded; 5 is past N
    rollouts.open_group(store, episode_id=ep.id, source_version=v.id, step=2, kind="resample", n=6, config=CONFIG)
    check((5, 3))  # a larger N counts the sixth
    rollouts.open_group(store, episode_id=ep.id, source_version=v.id, step=2, kind="resample", n=3, config=CONFIG)
    check((2, 2))
    # the unfinished rollout at position 1 goes on in a continuation that succeeds
    cont, _ = store.versions.branch(store.versions.get(members[1]), at_step=rows[0], steps=[])
    store.versions.update(cont.id, outcome=Outcome(done=True, success=True))
    assert rollouts.follow_member(store, members[1], cont.id)
    check((3, 3))
    store.close()
