"""Typed records: the nouns of the product (see design.md, "Concepts").

Plain pydantic v2 models with no I/O. The store (`sessions.store`) persists them;
the engine (`agent.engine`) creates them; prompt rendering (`trajectory.formats`) reads them.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Literal

import re
import unicodedata
from urllib.parse import unquote, urlsplit, urlunsplit

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
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # NaN/Infinity: no JSON can carry them


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
        """No credential enters a config, whatever built it (CLI, app, an import): what is
        stored, shown and exported is the endpoint without them (and without a query, which
        an endpoint does not take); text that is not an http(s) URL is refused."""
        return without_credentials(url) if url else url


# names that say a value is a secret (api_key, access_token, sig, bearer, pwd, ...), matched
# after NFKC folding (a fullwidth ｋｅｙ is a key) and without separators
_SECRET_PARAM = re.compile(r"key|token|secret|pass|pwd|auth|bearer|sig|credential|session|jwt|cookie", re.IGNORECASE)
# values that look like a key whatever their name: OpenAI/Anthropic (sk-), HF (hf_), GitHub (ghp_...), Groq
# (gsk_), xAI, Google (AIza), Slack (xox?-), Perplexity, Replicate, JWTs
_SECRET_VALUE = re.compile(r"^(sk|pk|rk|gsk|xai|pplx|hf|r8|ghp|gho|ghu|ghs|ghr|github_pat|glpat|xox[abprs])[-_]"
                           r"|^AIza|^eyJ[\w-]{8,}\.", re.IGNORECASE)
_DELIMS = set("?#;@=&")  # inside a decoded path segment: a query, fragment or parameter in disguise


def _fold(text: str) -> str:
    """What a name or value says once percent-decoding (repeated) and NFKC folding are undone."""
    for _ in range(3):
        text = unquote(text)
    return unicodedata.normalize("NFKC", text)


def _secret_param(name: str, value: str) -> bool:
    name, value = _fold(name), _fold(value)
    return bool(_SECRET_PARAM.search(name.replace("-", "").replace("_", ""))) or bool(
        _SECRET_VALUE.search(name) or _SECRET_VALUE.search(value))


def _query_pairs(query: str) -> list[tuple[str, str]]:
    """name=value pairs split on & and ; (servers differ on which they honour)."""
    pairs = []
    for part in re.split(r"[&;]", query):
        name, _, value = part.partition("=")
        pairs.append((name, value))
    return pairs


def _split(url: str):
    """urlsplit that raises ValueError for anything but a plain http(s)://host[:port]/path."""
    if not isinstance(url, str) or any(c.isspace() or ord(c) < 32 or c == "\x7f" or c == "\\" for c in url):
        raise ValueError("not a URL")
    parts = urlsplit(url)
    parts.port  # noqa: B018 - raises on a bad port
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError("not an http(s) URL")
    return parts


def _bad_segment(segment: str) -> str | None:
    """Why a path segment may carry a credential: a ;parameter, an encoded ?/#/;/@/=, a key."""
    if ";" in segment:
        return "a ;parameter in the path"
    folded = _fold(segment)
    if _DELIMS & set(folded) or "/" in folded:
        return "an encoded ?, #, ;, @ or = in the path"
    if _SECRET_VALUE.search(folded):
        return "a key in the path"
    return None


def url_credentials(url: str) -> str | None:
    """Where `url` carries a credential (userinfo, a key/token/... query parameter, a key in
    the path, a ;parameter, an encoded delimiter, a fragment), or None: a key belongs in
    OPENAI_API_KEY, never in a stored URL. Text that is not an http(s) URL counts as one
    (nothing can be said about it)."""
    try:
        parts = _split(url.strip())
    except (ValueError, AttributeError):
        return "text that is not an http(s) URL"
    if "@" in parts.netloc:
        return "user:password@"
    secret = next((n for n, v in _query_pairs(parts.query) if _secret_param(n, v)), None)
    if secret is not None:
        shown = secret[:40] if secret.isascii() and _SECRET_PARAM.search(secret) and not _SECRET_VALUE.search(
            _fold(secret)) else "..."
        return f"a query parameter ({shown}=) that carries a credential"
    if parts.fragment or "#" in url:
        return "a #fragment"
    for segment in parts.path.split("/"):
        why = _bad_segment(segment)
        if why:
            return why
    return None


def without_credentials(url: str) -> str:
    """The endpoint as it may be stored: scheme://host[:port]/path without `user:password@`,
    query (an endpoint takes none), fragment, ;parameters or any path segment that may hold
    a key (replaced by REDACTED). Raises ValueError for text that is not an http(s) URL."""
    parts = _split(url.strip())
    path = "/".join("REDACTED" if _bad_segment(seg) else seg for seg in parts.path.split("/"))
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], path, "", ""))


def safe_call_params(params: dict[str, Any]) -> dict[str, Any]:
    """A call record's params with its endpoint stripped of credentials (the same dict
    when there is nothing to strip)."""
    url = params.get("base_url")
    if not isinstance(url, str):
        return params
    try:
        clean = without_credentials(url)
    except ValueError:
        clean = None  # nothing can be said about it: not kept
    return params if clean == url else {**params, "base_url": clean}


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
