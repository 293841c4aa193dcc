"""The `jsonl` export format: one `TrajectoryRecord` per line, one line per version.

Versioned (`schema_version`); documented in docs/jsonl-schema.md, with the JSON Schema
generated from these models in docs/trajectory.schema.json (`python -m
sessions.exchange.schema > docs/trajectory.schema.json`).

Ids are relative to the file: episodes are numbered 1, 2, ... in the order they appear;
steps, model calls and versions are numbered per episode. A step shared by two versions of
one episode (the prefix before an edit) has the same `ref` in both records, so an import
rebuilds the version tree without copying steps, and export -> import -> export gives the
same bytes. References to steps that are not in the file are null.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from trajectory import kinds
from trajectory.records import AgentConfig, EditKind, ModelCall, Outcome, Source, Step, Task

SCHEMA_NAME = "react-editor/trajectory"
SCHEMA_VERSION = 1
# every format version an import reads; when SCHEMA_VERSION grows, the older ones stay here
# (with what upgrades them) and a newer one is refused (sessions.exchange.importer)
READABLE_VERSIONS = range(1, SCHEMA_VERSION + 1)


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class EditRecord(_M):
    """What a person's edit replaced. `replaced_step` is the step ref (null when that step
    is not in the file)."""

    kind: EditKind
    index: int | None = None
    replaced_step: int | None = None
    old_thought: str | None = None
    old_action: str | None = None
    origin: dict[str, Any] | None = None  # a suggested edit's provenance (`react-editor suggest`)


class VersionAnnotationRecord(_M):
    annotator: str
    created_at: str
    verdict: Literal["success", "failure", "unsure"] | None = None
    failure_modes: list[str] = Field(default_factory=list)
    notes: str | None = None
    exemplar_ready: bool = False


class StepAnnotationRecord(_M):
    annotator: str
    created_at: str
    tags: list[str] = Field(default_factory=list)
    note: str | None = None


def _fields_of(model: type[BaseModel], *names: str) -> dict[str, Any]:
    """Fields of a record, for a file record that carries them as they are."""
    return {n: (model.model_fields[n].annotation, model.model_fields[n]) for n in names}


CallRecord = create_model(  # a recorded ModelCall as the file holds it: a ref, no prompt text
    "CallRecord", __base__=_M, __doc__="One model request that produced a step (no prompt text: its hash and length).",
    ref=(int, Field(ge=1)), created_at=(str, ...),
    **_fields_of(ModelCall, *(n for n in ModelCall.model_fields if n not in ("id", "episode_id", "cache_key", "created_at"))),
)


StepRecord = create_model(  # a Step as the file holds it: refs instead of ids, its annotations
    "StepRecord", __base__=_M,
    __doc__="One turn. `source`: model | human | imported; `edit`: what a person's edit replaced; "
            "`calls`: refs into the record's `calls`; `annotations`: tag/note history, oldest first "
            "(the last entry is the current state).",
    ref=(int, Field(ge=1)), index=(int, Field(ge=1)),
    **_fields_of(Step, "thought", "action", "observation", "done", "reward", "info"),
    source=(Source, ...), edit=(EditRecord | None, None), calls=(list[int], Field(default_factory=list)),
    created_at=(str, ...), annotations=(list[StepAnnotationRecord], Field(default_factory=list)),
)


class EpisodeRecord(_M):
    ref: int = Field(ge=1)
    name: str | None = None
    created_at: str
    task: Task
    config: AgentConfig  # never holds an API key (AgentConfig has no such field)
    env_options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("task")
    @classmethod
    def _known_env(cls, task: Task) -> Task:
        if task.env not in kinds.known():  # a file speaks of the environments installed here
            raise ValueError(f"unknown environment {task.env!r} (one of: {', '.join(kinds.known())})")
        return task


class VersionRecord(_M):
    """`current`: the episode's current version - or, when that one is not in the file, the
    episode's last version in the file. `parent`: the ref of the version it was made from."""

    ref: int = Field(ge=1)
    parent: int | None = None
    current: bool = False
    name: str | None = None
    status: Literal["open", "done", "stopped"] = "open"
    error: str | None = None
    outcome: Outcome = Field(default_factory=Outcome)
    draft_thought: str | None = None
    draft_edit: EditRecord | None = None
    edits: list[EditRecord] = Field(default_factory=list)
    created_at: str
    updated_at: str
    annotations: list[VersionAnnotationRecord] = Field(default_factory=list)


class TrajectoryRecord(_M):
    """One line of a `jsonl` export: a version with its task, agent config, steps (with
    provenance), the model calls behind them, and its labels."""

    schema_name: Literal["react-editor/trajectory"] = Field(SCHEMA_NAME, alias="schema")
    schema_version: int = Field(SCHEMA_VERSION, ge=1)
    episode: EpisodeRecord
    version: VersionRecord
    steps: list[StepRecord]
    calls: list[CallRecord] = Field(default_factory=list)


def json_schema() -> dict[str, Any]:
    out = TrajectoryRecord.model_json_schema(by_alias=True)
    out["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    out["$id"] = f"https://react-editor.local/schemas/trajectory-v{SCHEMA_VERSION}.json"
    return out


def json_schema_text() -> str:
    return json.dumps(json_schema(), indent=2, ensure_ascii=False, sort_keys=False) + "\n"


if __name__ == "__main__":  # pragma: no cover
    import sys

    sys.stdout.write(json_schema_text())
