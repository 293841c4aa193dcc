"""Typed records: the nouns of the product (see design.md, "Concepts").

Plain pydantic v2 models with no I/O. The store (`sessions.store`) persists them;
the engine (`agent.engine`) creates them; prompt rendering (`trajectory.formats`) reads them.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Literal

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

Source = Literal["model", "human", "imported"]
ApiStyle = Literal["completions", "chat"]
PromptStyle = Literal["react", "act"]
EditKind = Literal["rewrite_thought", "delete_thought", "insert_thought", "rewrite_action", "branch"]

OUTCOME_FILTERS = ("success", "failure", "unfinished")  # how lists and search filter versions by outcome
# env_options key an import sets: the files/URLs the episode points at wait for a person's OK
UNCONFIRMED_REFS = "unconfirmed_references"
# env_options key an import sets when the file names a model endpoint: no key (and no prompt)
# goes there until a person confirms it
UNCONFIRMED_ENDPOINT = "unconfirmed_endpoint"
# env_options key an import sets: the digest of the episode's records, so a re-import adds nothing
IMPORT_DIGEST = "import_digest"
LOCAL_OPTIONS = (UNCONFIRMED_REFS, UNCONFIRMED_ENDPOINT, IMPORT_DIGEST)  # this database's marks: never exported


def env_only(options: dict[str, Any]) -> dict[str, Any]:
    """Episode env_options as an environment sees them (without this database's marks)."""
    return {k: v for k, v in options.items() if k not in LOCAL_OPTIONS}
MAX_TEXT = 20_000  # characters a person may put in one thought or action; a completion is cut there


def now() -> str:
    """UTC timestamp, ISO 8601, second precision is not enough for ordering edits."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Task(Record):
    """What the agent must do. `text` is the opening observation exactly as it enters the
    prompt: ALFWorld's room description + "Your task is to: ...", or "Question: ..." /
    "Claim: ...". `data` holds what the environment needs to rebuild it (game path,
    wording, ...); `gold` what scoring needs."""

    env: str = Field(pattern=r"^[a-z][a-z0-9_\-]{0,39}$")  # a family kind (envs.registry)
    id: str
    type: str | None = None
    text: str
    gold: str | None = None
    source: str = "builtin"
    data: dict[str, Any] = Field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.env}:{self.id}"


class AgentConfig(Record):
    """How the agent is driven. The API key is never part of it (it comes from the
    environment only), so a config can be stored and exported safely."""

    model: str = "gpt-3.5-turbo-instruct"
    base_url: str | None = None
    api_style: ApiStyle = "completions"
    style: PromptStyle = "react"
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 100
    exemplar_set: str | None = None  # None: the built-in exemplars for the task's env
    max_steps: int | None = None  # None: the env's default (ALFWorld 50, HotpotQA 7, FEVER 5)
    timeout_s: float = 60.0
    max_retries: int = 4
    cache: bool = True  # answer identical temperature-0 requests from the local cache

    @field_validator("base_url")
    @classmethod
    def _no_credentials(cls, url: str | None) -> str | None:
        """`user:password@` never enters a config, whatever built it (CLI, app, an import):
        what is stored, shown and exported is the endpoint without them."""
        return without_credentials(url) if url else url


# query parameters whose name says they carry a secret (api_key, access_token, sig, ...)
_SECRET_PARAM = re.compile(r"key|token|secret|pass|auth|sig|credential|session", re.IGNORECASE)


def _secret_param(name: str, value: str) -> bool:
    return bool(_SECRET_PARAM.search(name)) or name.startswith("sk-") or value.startswith("sk-")


def url_credentials(url: str) -> str | None:
    """Where `url` carries a credential (userinfo, a key/token/... query parameter, a
    fragment), or None: a key belongs in OPENAI_API_KEY, never in a stored URL."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return None
    if "@" in parts.netloc:
        return "user:password@"
    secret = next((n for n, v in parse_qsl(parts.query, keep_blank_values=True) if _secret_param(n, v)), None)
    if secret is not None:
        shown = secret[:40] if _SECRET_PARAM.search(secret) and not secret.startswith("sk-") else "..."
        return f"a query parameter ({shown}=) that carries a credential"
    if parts.fragment:
        return "a #fragment"
    return None


def without_credentials(url: str) -> str:
    """The URL without `user:password@`, secret-named query parameters and the fragment
    (unparseable text is returned as is)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if url_credentials(url) is None:
        return url
    query = urlencode([(n, v) for n, v in parse_qsl(parts.query, keep_blank_values=True) if not _secret_param(n, v)])
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2], query=query, fragment=""))


def safe_call_params(params: dict[str, Any]) -> dict[str, Any]:
    """A call record's params with its endpoint stripped of credentials (the same dict
    when there is nothing to strip)."""
    url = params.get("base_url")
    if not isinstance(url, str) or url_credentials(url) is None:
        return params
    return {**params, "base_url": without_credentials(url)}


# How people read an edit kind (faces never show the internal ids).
EDIT_WORDS = {
    "rewrite_thought": "thought rewritten",
    "delete_thought": "thought deleted",
    "insert_thought": "thought inserted",
    "rewrite_action": "action rewritten",
    "branch": "branched",
}


class EditInfo(Record):
    """What a person's edit replaced: the step it was made on and the old text."""

    kind: EditKind
    index: int | None = None  # the step position the edit was made at
    replaced_step: int | None = None
    old_thought: str | None = None
    old_action: str | None = None
    # where a suggested edit came from (issue 29): critic model, prompt hash, what-if groups
    origin: dict[str, Any] | None = None


class Usage(Record):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_prompt_tokens: int | None = None


class ModelCall(Record):
    """One request to a model, recorded when it happens. The prompt itself is not stored:
    it is a pure function of the version's inputs (invariant 3); its hash proves which."""

    id: int | None = None
    episode_id: int | None = None
    created_at: str = Field(default_factory=now)
    model: str
    api_style: ApiStyle
    params: dict[str, Any] = Field(default_factory=dict)  # temperature, stop, max_tokens, ...
    purpose: Literal["step", "action_fallback", "critic"] = "step"
    prompt_hash: str
    prompt_chars: int
    completion: str | None = None
    usage: Usage = Field(default_factory=Usage)
    latency_ms: float | None = None
    attempts: int = 1
    cached: bool = False
    error: str | None = None
    cache_key: str | None = None  # set when the response may answer identical requests later
    cut_from: int | None = None  # the completion's length when it was cut to MAX_TEXT


class Step(Record):
    """One turn of a trajectory. Immutable once stored.

    ALFWorld: a turn is either a thought (`> think: ...`, observation `OK.`) or an action.
    Wikipedia: a turn is Thought i + Action i + Observation i (the thought is None in the
    `act` style or when deleted). `thought` never carries the `think:` prefix.
    """

    id: int | None = None
    episode_id: int | None = None
    parent_id: int | None = None
    index: int  # 1-based position in its version
    thought: str | None = None
    action: str | None = None
    observation: str | None = None
    done: bool = False
    reward: float = 0.0
    info: dict[str, Any] = Field(default_factory=dict)
    source: Source = "model"
    edit: EditInfo | None = None
    call_ids: list[int] = Field(default_factory=list)
    snapshot: dict[str, Any] | None = None  # env state after this step, when the env can
    created_at: str = Field(default_factory=now)
    signals: list[str] | None = None  # automatic flags (trajectory.signals); None: not computed yet


class Outcome(Record):
    done: bool = False
    success: bool | None = None
    reward: float = 0.0
    metrics: dict[str, Any] = Field(default_factory=dict)  # em, f1, answer, won, ...


class Version(Record):
    """A named pointer to a path root -> `leaf_step_id` (None: no steps yet).

    `draft_thought` is a person's thought waiting for its action (Wikipedia format: an
    inserted or rewritten thought whose action the model still has to write)."""

    id: int | None = None
    episode_id: int
    parent_version: int | None = None
    leaf_step_id: int | None = None
    draft_thought: str | None = None
    draft_edit: EditInfo | None = None
    edits: list[EditInfo] = Field(default_factory=list)  # the person's edits along this path
    name: str | None = None
    status: Literal["open", "done", "stopped"] = "open"
    error: str | None = None
    outcome: Outcome = Field(default_factory=Outcome)
    created_at: str = Field(default_factory=now)
    updated_at: str = Field(default_factory=now)


class Episode(Record):
    """One task attempted under one agent config; owns a tree of steps."""

    id: int | None = None
    task: Task
    config: AgentConfig
    env_options: dict[str, Any] = Field(default_factory=dict)  # wording, wiki backend, ...
    current_version: int | None = None
    name: str | None = None
    created_at: str = Field(default_factory=now)
