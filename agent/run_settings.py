"""Run settings checked before anything is written: a bad model flag, agent
config field or endpoint is one line, and no empty episode is left behind."""

from __future__ import annotations

import math
from urllib.parse import urlsplit

from agent import exemplars
from sessions.store import StoreError
from trajectory.prompt_files import ExemplarError
from trajectory.records import AgentConfig, url_credentials, without_credentials

MAX_TIMEOUT_S = 3600.0  # one model answer (react_editor.args bounds --timeout the same)
MAX_RETRIES = 100


class ConfigError(ValueError):
    """A run setting that cannot work (one line, never echoing a credential)."""


def check_base_url(url: str | None, what: str = "the endpoint (base URL)") -> None:
    """An endpoint is http(s)://host[:port][/path] with no credential anywhere in it
    (user:password@, a key/token/... query parameter, a #fragment): the key comes from
    OPENAI_API_KEY only, and a URL is stored, shown and exported."""
    if not url:
        return
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        raise ConfigError(f"{what} is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in url.strip()):
        raise ConfigError(
            f"{what.replace(' (base URL)', '')} must start with http:// or https:// and name a host "
            f"(got {(parts.scheme[:10] + ':...') if parts.scheme else 'no scheme'})"
        )
    try:
        without_credentials(url)
    except ValueError:
        raise ConfigError(f"{what} is not a valid URL") from None
    where = url_credentials(url)
    if where is not None:
        raise ConfigError(f"{what} must not contain credentials ({where}); put the key in OPENAI_API_KEY")
    if "?" in url:  # `.../v1?x=1` would send requests to `/v1/?x=1completions`
        raise ConfigError(f"{what} takes no query (the part after ?): give scheme://host[:port]/path only")


def check_config(config: AgentConfig, env: str, store=None) -> None:
    """Raise ConfigError when `config` cannot run `env` tasks."""
    check_base_url(config.base_url)
    if not config.model.strip():
        raise ConfigError("the model name is empty")
    for name, value, most in (("temperature", config.temperature, 2.0), ("top_p", config.top_p, 1.0)):
        if not math.isfinite(value) or not 0 <= value <= most:  # the API's ranges: more is refused or nonsense
            raise ConfigError(f"{name} must be between 0 and {most:g} (got {value:g})")
    if config.max_steps is not None and config.max_steps < 1:
        raise ConfigError(f"max steps must be at least 1 (got {config.max_steps})")
    if config.max_tokens < 1:
        raise ConfigError(f"max tokens must be at least 1 (got {config.max_tokens})")
    if not math.isfinite(config.timeout_s) or not 0 < config.timeout_s <= MAX_TIMEOUT_S:
        raise ConfigError(
            f"the timeout must be more than 0 and at most {MAX_TIMEOUT_S:g} seconds (got {config.timeout_s:g})"
        )
    if not 0 <= config.max_retries <= MAX_RETRIES:
        raise ConfigError(f"max retries must be 0 to {MAX_RETRIES} (got {config.max_retries})")
    try:
        exemplars.prompt_dict(env, config.exemplar_set, store)
    except (ExemplarError, StoreError) as exc:
        raise ConfigError(str(exc).splitlines()[0]) from None
