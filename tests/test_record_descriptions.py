"""Every field of every record model says what it means (`Field(description=...)`): the
descriptions are what docs/trajectory.schema.json and a reader of the models see."""

from __future__ import annotations

import importlib
import pkgutil

import pytest
from pydantic import BaseModel, Field

PACKAGES = ("trajectory", "sessions", "agent")


def _import_all() -> None:
    for name in PACKAGES:
        pkg = importlib.import_module(name)
        for mod in pkgutil.walk_packages(pkg.__path__, f"{name}."):
            if not mod.name.endswith("__main__"):
                importlib.import_module(mod.name)


def _models(base: type[BaseModel] = BaseModel) -> set[type[BaseModel]]:
    """The project's pydantic models: every subclass of BaseModel defined in PACKAGES."""
    found = set()
    for sub in base.__subclasses__():
        if sub.__module__.split(".")[0] in PACKAGES:
            found.add(sub)
        found |= _models(sub)
    return found


def undescribed(model: type[BaseModel]) -> list[str]:
    """`Model.field` for each field without a description (or with a blank one)."""
    return [
        f"{model.__name__}.{name}" for name, info in model.model_fields.items() if not (info.description or "").strip()
    ]


def test_every_record_field_has_a_description():
    _import_all()
    models = _models()
    names = {m.__name__ for m in models}
    # the walk finds the records the store keeps and the export writes
    assert {
        "Task",
        "AgentConfig",
        "Step",
        "Version",
        "Episode",
        "ModelCall",
        "Job",
        "Experiment",
        "TrajectoryRecord",
        "StepRecord",
        "CallRecord",
    } <= names, sorted(names)
    missing = sorted(f for m in models for f in undescribed(m))
    assert not missing, f"fields without Field(description=...): {missing}"


@pytest.mark.parametrize(
    "field, caught",
    [(Field(description="What it is."), False), (Field(None), True), (Field(None, description="  "), True)],
)
def test_a_field_without_a_description_is_caught(field, caught):
    class Probe(BaseModel):
        x: int | None = field

    assert undescribed(Probe) == (["Probe.x"] if caught else [])
