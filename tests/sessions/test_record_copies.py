"""The store's own copy of a record (`sessions.row_records.replaced`) is what pydantic's
`model_copy(update=...)` makes: same fields, same fields set, the original untouched; and the
records it builds without validation are what validation makes."""

from sessions.row_records import replaced
from trajectory.records import Outcome, Step, Version


def _same(a, b) -> None:
    assert type(a) is type(b)
    assert a == b
    assert a.model_fields_set == b.model_fields_set
    assert a.model_dump(exclude_unset=True) == b.model_dump(exclude_unset=True)
    assert a.model_dump_json(exclude_defaults=True) == b.model_dump_json(exclude_defaults=True)


def test_a_step_copied_with_its_row_ids_is_what_model_copy_makes():
    s = Step(index=2, thought="t", action="Search[x]", observation="o", call_ids=[-1], info={"a": 1})
    upd = {"id": 7, "episode_id": 3, "parent_id": 5, "call_ids": [11]}
    new = replaced(s, upd)
    _same(new, s.model_copy(update=upd))
    assert (s.id, s.parent_id, s.call_ids) == (None, None, [-1])  # the original is untouched
    assert "id" not in s.model_fields_set
    new.info["b"] = 2  # shallow, as model_copy: the containers are shared
    assert s.info == {"a": 1, "b": 2}


def test_a_version_copied_with_its_new_leaf_is_what_model_copy_makes():
    v = Version.model_construct(id=4, episode_id=1, leaf_step_id=None, status="open", outcome=Outcome())
    upd = {
        "leaf_step_id": 9,
        "updated_at": "2026-01-01T00:00:00.000000+00:00",
        "status": "done",
        "outcome": Outcome(done=True, success=True, reward=1.0),
    }
    _same(replaced(v, upd), v.model_copy(update=upd))
    assert v.leaf_step_id is None and v.status == "open"


def test_an_episodes_first_version_made_without_validation_is_what_version_makes():
    """`episodes._first_version` gives every field itself (model_construct filling defaults
    is slow): it must stay what `Version(id=, episode_id=, name=)` makes, a default changed
    in the record included."""
    from sessions.episodes import _first_version

    made = _first_version(7, 3, "react")
    plain = Version(id=7, episode_id=3, name="react", created_at=made.created_at, updated_at=made.updated_at)
    assert made.model_dump() == plain.model_dump()
    assert made.model_dump_json(exclude_defaults=True) == plain.model_dump_json(exclude_defaults=True)
