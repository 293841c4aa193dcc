"""What a family's own command group (`EnvFamily.cli`) gets from the command line, which
sits above `envs/`: the CLI hands its helpers over when it registers the group."""

from __future__ import annotations

from typing import Any


class _Helpers:
    """`CliError`, `add_common`, `emit`, `progress`, `check_url` of `react_editor.command_run`, once `use`d."""

    def __init__(self) -> None:
        self._h: Any = None

    def use(self, helpers: Any) -> None:
        self._h = helpers

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or self.__dict__.get("_h") is None:
            raise AttributeError(name)
        return getattr(self._h, name)


cli = _Helpers()
