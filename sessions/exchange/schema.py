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
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from trajectory import kinds
from trajectory.records import AgentConfig, EditKind, ModelCall, Outcome, Source, Step, Task

SCHEMA_NAME: Final = "react-editor/trajectory"
SCHEMA_VERSION = 1
# every format version an import reads; when SCHEMA_VERSION grows, the older ones stay here
# (with what upgrades them) and a newer one is refused (sessions.exchange.importer)
READABLE_VERSIONS = range(1, SCHEMA_VERSION + 1)


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class EditRecord(_M):
    """What a person's edit replaced. `replaced_step` is the step ref (null when that step
    is not in the file)."""

    kind: EditKind = Field(
        description="What the edit did: rewrite_thought, delete_thought, insert_thought, rewrite_action or branch."
    )
    index: int | None = Field(None, description="The step position the edit was made at.")
    replaced_step: int | None = Field(
        None, description="The ref of the step the edit replaced; null when that step is not in the file."
    )
    old_thought: str | None = Field(None, description="The thought before the edit.")
    old_action: str | None = Field(None, description="The action before the edit.")
    origin: dict[str, Any] | None = Field(
        None, description="A suggested edit's provenance (`react-editor suggest`); null for a person's own edit."
    )


class VersionAnnotationRecord(_M):
    annotator: str = Field(description="Who labelled the version.")
    created_at: str = Field(description="When (UTC, ISO 8601).")
    verdict: Literal["success", "failure", "unsure"] | None = Field(
        None, description="A person's judgement: success, failure or unsure."
    )
    failure_modes: list[str] = Field(
        default_factory=list, description="Failure modes seen (reasoning_error, search_result_error, ...)."
    )
    notes: str | None = Field(None, description="Free text.")
    exemplar_ready: bool = Field(False, description="True when a person marks the version fit to serve as an exemplar.")


class StepAnnotationRecord(_M):
    annotator: str = Field(description="Who labelled the step.")
    created_at: str = Field(description="When (UTC, ISO 8601).")
    tags: list[str] = Field(
        default_factory=list,
        description="Short tags (approved, rejected, ...); negative ones give the step weight 0 in chat-sft.",
    )
    note: str | None = Field(None, description="Free text.")


def _fields_of(model: type[BaseModel], *names: str) -> dict[str, Any]:
    """Fields of a record, for a file record that carries them as they are."""
    return {n: (model.model_fields[n].annotation, model.model_fields[n]) for n in names}


_CallRecord = create_model(  # a recorded ModelCall as the file holds it: a ref, no prompt text
    "CallRecord",
    __base__=_M,
    __doc__="One model request that produced a step (no prompt text: its hash and length).",
    ref=(int, Field(ge=1, description="The call's number within its episode in this file.")),
    created_at=(str, Field(description="When the request was made (UTC, ISO 8601).")),
    **_fields_of(
        ModelCall, *(n for n in ModelCall.model_fields if n not in ("id", "episode_id", "cache_key", "created_at"))
    ),
)


_StepRecord = create_model(  # a Step as the file holds it: refs instead of ids, its annotations
    "StepRecord",
    __base__=_M,
    __doc__="One turn. `source`: model | human | imported; `edit`: what a person's edit replaced; "
    "`calls`: refs into the record's `calls`; `annotations`: tag/note history, oldest first "
    "(the last entry is the current state).",
    ref=(int, Field(ge=1, description="The step's number within its episode in this file (shared steps keep it).")),
    index=(int, Field(ge=1, description="1-based position in its version.")),
    **_fields_of(Step, "thought", "action", "observation", "done", "reward", "info"),
    source=(Source, Field(description="Who wrote it: model, human or imported.")),
    edit=(EditRecord | None, Field(None, description="What a person's edit replaced, when the step comes from one.")),
    calls=(list[int], Field(default_factory=list, description="Refs into the record's `calls` that produced it.")),
    created_at=(str, Field(description="When the step was made (UTC, ISO 8601).")),
    annotations=(
        list[StepAnnotationRecord],
        Field(
            default_factory=list,
            description="Its tag and note history, oldest first (the last entry is the current state).",
        ),
    ),
    # the `messages` / `tools` styles' step (issue 42): written only when set, so a text-style step's
    # record is as before
    **_fields_of(Step, "reasoning", "tool_call", "message"),
)

if TYPE_CHECKING:  # made from the records' fields at run time: attributes a type checker cannot see
    CallRecord: TypeAlias = Any
    StepRecord: TypeAlias = Any
else:
    CallRecord, StepRecord = _CallRecord, _StepRecord


class EpisodeRecord(_M):
    ref: int = Field(ge=1, description="The episode's number in this file (1, 2, ... in file order).")
    name: str | None = Field(None, description="A name a person gave it.")
    created_at: str = Field(description="When it was made (UTC, ISO 8601).")
    task: Task = Field(description="What the agent must do.")
    config: AgentConfig = Field(
        description="How the agent is driven; never holds an API key (AgentConfig has no such field)."
    )
    env_options: dict[str, Any] = Field(
        default_factory=dict, description="The environment's options (wording, wiki backend, ...)."
    )

    @field_validator("task")
    @classmethod
    def _known_env(cls, task: Task) -> Task:
        if task.env not in kinds.known():  # a file speaks of the environments installed here
            raise ValueError(f"unknown environment {task.env!r} (one of: {', '.join(kinds.known())})")
        return task


class VersionRecord(_M):
    """`current`: the episode's current version - or, when that one is not in the file, the
    episode's last version in the file. `parent`: the ref of the version it was made from."""

    ref: int = Field(ge=1, description="The version's number within its episode in this file.")
    parent: int | None = Field(
        None, description="The ref of the version it was made from; null when that one is not in the file."
    )
    current: bool = Field(
        False,
        description="The episode's current version, or its last version in the file when that one is not exported.",
    )
    name: str | None = Field(None, description="A name a person gave it.")
    status: Literal["open", "done", "stopped"] = Field(
        "open", description="open (may go on), done (the episode ended) or stopped (halted on request or by a limit)."
    )
    error: str | None = Field(None, description="Why the last run failed, in one line.")
    outcome: Outcome = Field(default_factory=Outcome, description="How the episode went on this version.")
    draft_thought: str | None = Field(None, description="A person's thought waiting for the model to write its action.")
    draft_edit: EditRecord | None = Field(None, description="What the edit behind the draft thought replaced.")
    edits: list[EditRecord] = Field(
        default_factory=list, description="The person's edits along this path, oldest first."
    )
    created_at: str = Field(description="When it was made (UTC, ISO 8601).")
    updated_at: str = Field(description="When it last changed (UTC, ISO 8601).")
    annotations: list[VersionAnnotationRecord] = Field(
        default_factory=list, description="Its label history, oldest first (the last entry is the current state)."
    )


class TrajectoryRecord(_M):
    """One line of a `jsonl` export: a version with its task, agent config, steps (with
    provenance), the model calls behind them, and its labels."""

    schema_name: Literal["react-editor/trajectory"] = Field(
        SCHEMA_NAME, alias="schema", description="The format's name: react-editor/trajectory."
    )
    schema_version: int = Field(
        SCHEMA_VERSION, ge=1, description="The format version; an import refuses one newer than it reads."
    )
    episode: EpisodeRecord = Field(
        description="The episode the version belongs to (the same in each of the episode's records)."
    )
    version: VersionRecord = Field(description="The version this line holds.")
    steps: list[StepRecord] = Field(
        description="The version's steps in order (a step shared with an earlier record keeps its ref)."
    )
    calls: list[CallRecord] = Field(
        default_factory=list, description="The model calls behind the steps (no prompt text)."
    )


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
