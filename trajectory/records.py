"""Typed records: the nouns of the product (see design.md, "Concepts").

Plain pydantic v2 models with no I/O. The store (`sessions.store`) persists them;
the engine (`agent.engine`) creates them; prompt rendering (`trajectory.formats`) reads them.
"""

from __future__ import annotations

import re
import time
import unicodedata
from datetime import datetime, timezone
from typing import Any, Literal, get_args
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

Source = Literal["model", "human", "imported"]
ApiStyle = Literal["completions", "chat", "messages", "tools"]
API_STYLES: tuple[str, ...] = get_args(ApiStyle)  # ApiStyle's values, for choices
PromptStyle = Literal["react", "act"]
EditKind = Literal[
    "rewrite_thought", "delete_thought", "insert_thought", "rewrite_action", "rewrite_reasoning", "branch"
]

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
    """UTC timestamp, ISO 8601, second precision is not enough for ordering edits: as
    `datetime.now(timezone.utc).isoformat(timespec="microseconds")` writes it, with the
    date and time of the second formatted once per second (a step's rows take several
    stamps; isoformat with a zone costs more than all the rest of it)."""
    us = time.time_ns() // 1000
    second, micro = divmod(us, 1_000_000)
    head = _SECOND
    if head[0] != second:  # (one tuple, replaced whole: a thread never sees a half-made one)
        head = _second(second)
    return f"{head[1]}.{micro:06d}+00:00"


def _second(second: int) -> tuple[int, str]:
    global _SECOND
    _SECOND = (second, datetime.fromtimestamp(second, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S"))
    return _SECOND


_SECOND: tuple[int, str] = (-1, "")


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # NaN/Infinity: no JSON can carry them


class Task(Record):
    """What the agent must do. `text` is the opening observation exactly as it enters the
    prompt: ALFWorld's room description + "Your task is to: ...", or "Question: ..." /
    "Claim: ...". `data` holds what the environment needs to rebuild it (game path,
    wording, ...); `gold` what scoring needs."""

    env: str = Field(
        pattern=r"^[a-z][a-z0-9_\-]{0,39}$",
        description="The environment family's kind (a name in envs.registry), e.g. alfworld or hotpotqa.",
    )
    id: str = Field(description="The task's id within its environment; `env:id` is the task's key.")
    type: str | None = Field(
        None,
        description="A sub-kind for grouping and per-type exemplars (ALFWorld's task types); None when the family has "
        "none.",
    )
    text: str = Field(description="The opening observation exactly as it enters the prompt.")
    gold: str | None = Field(
        None, description="The answer scoring compares with (HotpotQA, FEVER); None when the environment scores itself."
    )
    source: str = Field(
        "builtin", description="The task set it was listed from (the family's `sources`, `builtin` by default)."
    )
    data: dict[str, Any] = Field(
        default_factory=dict, description="What the environment needs to rebuild the task (game path, wording, ...)."
    )

    @property
    def key(self) -> str:
        return f"{self.env}:{self.id}"


class AgentConfig(Record):
    """How the agent is driven. The API key is never part of it (it comes from the
    environment only), so a config can be stored and exported safely."""

    model: str = Field("gpt-3.5-turbo-instruct", description="The model name each request sends.")
    base_url: str | None = Field(
        None,
        description="The OpenAI-compatible endpoint, without credentials; None: OPENAI_BASE_URL or the client's "
        "default.",
    )
    api_style: ApiStyle = Field(
        "completions",
        description="completions (one text prompt), chat (the transcript as one user message), messages (a "
        "multi-turn conversation: one assistant message per step) or tools (native tool calls).",
    )
    style: PromptStyle = Field("react", description="Prompt style: react (thoughts and actions) or act (actions only).")
    temperature: float = Field(0.0, description="Sampling temperature of each request.")
    top_p: float = Field(1.0, description="Nucleus-sampling mass of each request.")
    max_tokens: int = Field(100, description="The most tokens one completion may have.")
    exemplar_set: str | None = Field(
        None, description="The exemplar set whose prompts are used; None: the built-in exemplars for the task's env."
    )
    max_steps: int | None = Field(
        None, description="The step limit; None: the environment's default (ALFWorld 50, HotpotQA 7, FEVER 5)."
    )
    timeout_s: float = Field(
        60.0, description="Seconds one request may take before it counts as failed (and is retried)."
    )
    max_retries: int = Field(4, description="How many times a failed request is retried (a 429 too).")
    cache: bool = Field(True, description="Answer identical temperature-0 requests from the local cache.")

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
_SECRET_VALUE = re.compile(
    r"^(sk|pk|rk|gsk|xai|pplx|hf|r8|ghp|gho|ghu|ghs|ghr|github_pat|glpat|xox[abprs])[-_]"
    r"|^AIza|^eyJ[\w-]{8,}\.",
    re.IGNORECASE,
)
_DELIMS = set("?#;@=&")  # inside a decoded path segment: a query, fragment or parameter in disguise


def _fold(text: str) -> str:
    """What a name or value says once percent-decoding (repeated) and NFKC folding are undone."""
    for _ in range(3):
        text = unquote(text)
    return unicodedata.normalize("NFKC", text)


def _secret_param(name: str, value: str) -> bool:
    name, value = _fold(name), _fold(value)
    return bool(_SECRET_PARAM.search(name.replace("-", "").replace("_", ""))) or bool(
        _SECRET_VALUE.search(name) or _SECRET_VALUE.search(value)
    )


def _query_pairs(query: str) -> list[tuple[str, str]]:
    """name=value pairs split on & and ; (servers differ on which they honour)."""
    pairs = []
    for part in re.split(r"[&;]", query):
        name, _, value = part.partition("=")
        pairs.append((name, value))
    return pairs


def _split(url: str) -> SplitResult:
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
        shown = (
            secret[:40]
            if secret.isascii() and _SECRET_PARAM.search(secret) and not _SECRET_VALUE.search(_fold(secret))
            else "..."
        )
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
    "rewrite_reasoning": "reasoning rewritten",
    "branch": "branched",
}


class EditInfo(Record):
    """What a person's edit replaced: the step it was made on and the old text."""

    kind: EditKind = Field(
        description="What the edit did: rewrite_thought, delete_thought, insert_thought, rewrite_action, "
        "rewrite_reasoning or branch."
    )
    index: int | None = Field(None, description="The step position the edit was made at.")
    replaced_step: int | None = Field(
        None, description="The id of the step the edit replaced; None when it replaced none."
    )
    old_thought: str | None = Field(None, description="The thought before the edit.")
    old_action: str | None = Field(None, description="The action before the edit.")
    old_reasoning: str | None = Field(
        None, description="The reasoning (`reasoning_content`) before a rewrite_reasoning edit; None otherwise."
    )
    # where a suggested edit came from (issue 29): critic model, prompt hash, what-if groups
    origin: dict[str, Any] | None = Field(
        None,
        description="Where a suggested edit came from (critic model, prompt hash, what-if groups); None for a "
        "person's own edit.",
    )


class Usage(Record):
    prompt_tokens: int | None = Field(
        None, description="Prompt tokens as the endpoint reported them; None: not reported."
    )
    completion_tokens: int | None = Field(
        None, description="Completion tokens as the endpoint reported them; None: not reported."
    )
    cached_prompt_tokens: int | None = Field(
        None, description="Prompt tokens the endpoint served from its own prompt cache; None: not reported."
    )


class ModelCall(Record):
    """One request to a model, recorded when it happens. The prompt itself is not stored:
    it is a pure function of the version's inputs (invariant 3); its hash proves which."""

    id: int | None = Field(None, description="Row id in this database; None until stored.")
    episode_id: int | None = Field(None, description="The episode the request was made for.")
    created_at: str = Field(default_factory=now, description="When the request was made (UTC, ISO 8601).")
    model: str = Field(description="The model the request named.")
    api_style: ApiStyle = Field(description="completions, chat, messages or tools.")
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="Request parameters: temperature, stop, max_tokens, base_url (without credentials), ...",
    )
    purpose: Literal["step", "action_fallback", "critic"] = Field(
        "step",
        description="Why it was made: step (the next step), action_fallback (an action for a thought) or critic (a "
        "suggestion).",
    )
    prompt_hash: str = Field(
        description="Hash of the prompt sent; the prompt itself is rebuilt from the version's inputs, not stored."
    )
    prompt_chars: int = Field(description="Length of the prompt sent, in characters.")
    completion: str | None = Field(None, description="The text the model returned; None when the call failed.")
    usage: Usage = Field(default_factory=Usage, description="Token counts the endpoint reported.")
    latency_ms: float | None = Field(
        None, description="Milliseconds until the answer (0 when the local cache answered); None: no answer."
    )
    attempts: int = Field(1, description="How many requests it took, retries included.")
    cached: bool = Field(False, description="True when the local cache answered instead of the endpoint.")
    error: str | None = Field(None, description="Why the call failed, in one line; None on success.")
    cache_key: str | None = Field(None, description="Set when the response may answer identical requests later.")
    cut_from: int | None = Field(
        None, description="The completion's length when it was cut to MAX_TEXT; None when it was not cut."
    )


class ToolCall(Record):
    """A step's native tool call (the `tools` API style; the export's form of any action)."""

    id: str = Field(description="The call's id, as the model gave it; the tool result message names it.")
    name: str = Field(description="The tool's name (search, lookup, finish, act, ...).")
    arguments: dict[str, Any] = Field(
        default_factory=dict, description="The arguments, parsed and validated against the tool's JSON schema."
    )


class Step(Record):
    """One turn of a trajectory. Immutable once stored.

    ALFWorld: a turn is either a thought (`> think: ...`, observation `OK.`) or an action.
    Wikipedia: a turn is Thought i + Action i + Observation i (the thought is None in the
    `act` style or when deleted). `thought` never carries the `think:` prefix.
    """

    id: int | None = Field(None, description="Row id in this database; None until stored.")
    episode_id: int | None = Field(None, description="The episode whose step tree holds it.")
    parent_id: int | None = Field(None, description="The step before it on its path; None for a first step.")
    index: int = Field(description="1-based position in its version.")
    thought: str | None = Field(
        None, description="The reasoning text, without a `think:` prefix; None when the turn has none."
    )
    action: str | None = Field(None, description="The action sent to the environment; None for a thought-only turn.")
    observation: str | None = Field(None, description="What the environment answered.")
    done: bool = Field(False, description="True when the environment ended the episode at this step.")
    reward: float = Field(0.0, description="The environment's reward for this step.")
    info: dict[str, Any] = Field(
        default_factory=dict,
        description="The environment's extra information for this step (won, answer, carried_from, ...).",
    )
    source: Source = Field("model", description="Who wrote it: model, human or imported.")
    edit: EditInfo | None = Field(None, description="What a person's edit replaced, when the step comes from one.")
    call_ids: list[int] = Field(default_factory=list, description="Ids of the model calls that produced the step.")
    snapshot: dict[str, Any] | None = Field(
        None, description="Environment state after this step, when the environment can save one."
    )
    created_at: str = Field(default_factory=now, description="When the step was made (UTC, ISO 8601).")
    signals: list[str] | None = Field(None, description="Automatic flags (trajectory.signals); None: not computed yet.")
    reasoning: str | None = Field(
        None,
        description="The model's separate reasoning channel (`reasoning_content`), kept apart from the thought; "
        "None when the server sent none.",
    )
    tool_call: ToolCall | None = Field(
        None, description="The native tool call the action came from (the `tools` API style); None otherwise."
    )
    message: dict[str, Any] | None = Field(
        None,
        description="The raw assistant message of the `messages`/`tools` styles as the server returned it "
        "(content, reasoning_content, tool_calls with their arguments as sent); None otherwise.",
    )


class Outcome(Record):
    done: bool = Field(False, description="True when the environment ended the episode.")
    success: bool | None = Field(
        None, description="Whether it succeeded by the environment's measure; None: not known."
    )
    reward: float = Field(0.0, description="The environment's reward at the last step.")
    metrics: dict[str, Any] = Field(
        default_factory=dict, description="The environment's scores and details: em, f1, answer, won, ..."
    )


class Version(Record):
    """A named pointer to a path root -> `leaf_step_id` (None: no steps yet).

    `draft_thought` is a person's thought waiting for its action (Wikipedia format: an
    inserted or rewritten thought whose action the model still has to write)."""

    id: int | None = Field(None, description="Row id in this database; None until stored.")
    episode_id: int = Field(description="The episode it belongs to.")
    parent_version: int | None = Field(None, description="The version it was made from; None for an episode's first.")
    leaf_step_id: int | None = Field(None, description="The last step of its path; None: no steps yet.")
    draft_thought: str | None = Field(None, description="A person's thought waiting for the model to write its action.")
    draft_edit: EditInfo | None = Field(None, description="What the edit behind the draft thought replaced.")
    edits: list[EditInfo] = Field(default_factory=list, description="The person's edits along this path, oldest first.")
    name: str | None = Field(None, description="A name a person gave it.")
    status: Literal["open", "done", "stopped"] = Field(
        "open", description="open (may go on), done (the episode ended) or stopped (halted on request or by a limit)."
    )
    error: str | None = Field(None, description="Why the last run failed, in one line; None when it did not.")
    outcome: Outcome = Field(default_factory=Outcome, description="How the episode went on this version.")
    created_at: str = Field(default_factory=now, description="When it was made (UTC, ISO 8601).")
    updated_at: str = Field(default_factory=now, description="When it last changed (UTC, ISO 8601).")


Better = Literal["A", "B", "tie"]


class Judgment(Record):
    """A person's pairwise preference between two versions of one episode (Compare's "left is
    better / right is better / tie", `react-editor judge`). Stored with `version_a < version_b`
    (a judgment of (b, a) is the same pair, flipped); one per annotator and pair (judging it
    again replaces it), so two people's judgments of one pair are both kept."""

    id: int | None = Field(None, description="Row id in this database; None until stored.")
    episode_id: int = Field(description="The episode both versions belong to.")
    version_a: int = Field(description="The first version of the pair (the left one as it was asked).")
    version_b: int = Field(description="The second version of the pair (the right one as it was asked).")
    better: Better = Field(description="Which is better: A (version_a), B (version_b) or tie.")
    reason: str | None = Field(None, description="Why, in the annotator's words; None when none was given.")
    annotator: str = Field(
        description="Who judged (the signed-in user, --annotator, REACT_EDITOR_USER or the OS user)."
    )
    created_at: str = Field(default_factory=now, description="When it was (last) judged (UTC, ISO 8601).")


class Episode(Record):
    """One task attempted under one agent config; owns a tree of steps."""

    id: int | None = Field(None, description="Row id in this database; None until stored.")
    task: Task = Field(description="What the agent must do.")
    config: AgentConfig = Field(description="How the agent is driven (never an API key).")
    env_options: dict[str, Any] = Field(
        default_factory=dict,
        description="The environment's options (wording, wiki backend, ...) and this database's marks (LOCAL_OPTIONS).",
    )
    current_version: int | None = Field(None, description="The version shown and continued by default.")
    name: str | None = Field(None, description="A name a person gave it.")
    created_at: str = Field(default_factory=now, description="When it was made (UTC, ISO 8601).")
