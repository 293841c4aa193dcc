"""A family's actions as native tools: the JSON schemas a `tools`-style request declares,
and the two-way mapping between an action's text form (what the paper's transcripts, the
environment and `edit --action` use: `Search[Rell]`, `go to desk 1`) and a tool call
(`search({"entity": "Rell"})`, `act({"command": "go to desk 1"})`).

Pure: no environment is named here. Each family's transcript holds a `ToolSet` (its
`tools` attribute); the layers above reach it through `trajectory.kinds.transcript(kind)`.

Two text forms cover the families we know:
- `bracket`: `Name[argument]`, one string argument per tool (the Wikipedia API: search,
  lookup, finish); the text name is the tool's `text_name` ("Search"), matched without case;
- `command`: one tool whose single string argument is the whole command (ALFWorld's and the
  TextWorld plugin's `act(command)`).

Arguments are validated against the tool's JSON schema (`jsonschema`), so a call with a
missing, extra or mistyped argument is refused with one line, before anything is written.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal


class ToolCallError(ValueError):
    """A call (or a text action) that does not fit the family's tools: unknown tool,
    arguments not matching the schema, text with no tool form. One line."""


@dataclass(frozen=True)
class Tool:
    """One function a model may call."""

    name: str  # the function name the model sends ("search", "act")
    description: str
    argument: str  # the one string argument ("entity", "command")
    argument_description: str = ""
    text_name: str = ""  # the bracket form's name ("Search"); "" for a command tool
    enum: tuple[str, ...] | None = None  # the argument's allowed values (FEVER's finish)

    def schema(self) -> dict[str, Any]:
        """The OpenAI `tools` entry: `{"type": "function", "function": {...}}`."""
        prop: dict[str, Any] = {"type": "string"}
        if self.argument_description:
            prop["description"] = self.argument_description
        if self.enum:
            prop["enum"] = list(self.enum)
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object",
                    "properties": {self.argument: prop},
                    "required": [self.argument],
                    "additionalProperties": False,
                },
            },
        }


_BRACKET = re.compile(r"^\s*([A-Za-z_]\w*)\[(.*)\]\s*$", re.DOTALL)


@dataclass(frozen=True)
class ToolSet:
    """A family's tools and how its text actions map onto them."""

    tools: tuple[Tool, ...]
    form: Literal["bracket", "command"]
    _by_name: dict[str, Tool] = field(init=False, repr=False, compare=False)
    _validators: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {t.name: t for t in self.tools})
        object.__setattr__(self, "_validators", {})
        if self.form == "command" and len(self.tools) != 1:
            raise ValueError("a command tool set has exactly one tool")

    def _validator(self, name: str) -> Any:
        """The tool's checked validator, made at its first call and kept (jsonschema.validate
        checks the schema and builds one at every call: a tools-style request maps every
        earlier step's action, ~0.5 ms each). jsonschema is imported here, not with the module:
        every command loads the families' transcripts, and it costs ~30 ms of start-up."""
        made = self._validators.get(name)
        if made is None:
            import jsonschema

            params = self._by_name[name].schema()["function"]["parameters"]
            made = self._validators[name] = jsonschema.validators.validator_for(params)(params)
        return made

    def schemas(self) -> list[dict[str, Any]]:
        """Every tool's `tools` entry, in declaration order (part of the pinned request)."""
        return [t.schema() for t in self.tools]

    def check(self, name: str, arguments: Any) -> dict[str, Any]:
        """The arguments of a call to `name`, validated; raises ToolCallError. `arguments`
        may be a dict or the JSON string a server sends."""
        tool = self._by_name.get(name)
        if tool is None:
            known = ", ".join(self._by_name)
            raise ToolCallError(f"unknown tool {name!r} (the tools are: {known})")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                raise ToolCallError(f"the arguments of {name} are not JSON: {exc.msg}") from None
        from jsonschema.exceptions import best_match

        error = best_match(self._validator(name).iter_errors(arguments))
        if error is not None:
            raise ToolCallError(f"the arguments of {name} do not match its schema: {error.message}") from None
        return dict(arguments)

    def to_action(self, name: str, arguments: Any) -> str:
        """The text form of a call (`search`, {"entity": "Rell"} -> `Search[Rell]`);
        raises ToolCallError."""
        args = self.check(name, arguments)
        tool = self._by_name[name]
        value: str = args[tool.argument]
        if self.form == "command":
            return value
        return f"{tool.text_name}[{value}]"

    def to_call(self, action: str) -> tuple[str, dict[str, Any]]:
        """(name, arguments) of a text action (`Search[Rell]` -> ("search", {"entity":
        "Rell"})); raises ToolCallError when the text has no tool form."""
        if self.form == "command":
            tool = self.tools[0]
            args = {tool.argument: action.strip()}
            return tool.name, self.check(tool.name, args)
        m = _BRACKET.match(action)
        if m:
            for tool in self.tools:
                if tool.text_name.lower() == m.group(1).lower():
                    return tool.name, self.check(tool.name, {tool.argument: m.group(2)})
        forms = ", ".join(f"{t.text_name}[...]" for t in self.tools)
        raise ToolCallError(f"{action.strip()[:80]!r} is none of {forms}")

    def parse_call_text(self, text: str) -> tuple[str, dict[str, Any]]:
        """A call given as JSON `{"name": ..., "arguments": {...}}` (the CLI's `edit
        --action` accepts it beside the text form); raises ToolCallError."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ToolCallError(f"not a JSON tool call: {exc.msg}") from None
        if not isinstance(data, dict) or not isinstance(data.get("name"), str) or "arguments" not in data:
            raise ToolCallError('a JSON tool call is {"name": ..., "arguments": {...}}')
        return data["name"], self.check(data["name"], data["arguments"])


def wikipedia_tools(fever: bool = False) -> ToolSet:
    """The paper's Wikipedia API (section 3.1) as tools: search, lookup, finish."""
    finish = (
        Tool(
            "finish",
            "Finish the task with the claim's label.",
            "answer",
            "SUPPORTS, REFUTES or NOT ENOUGH INFO.",
            "Finish",
            ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO"),
        )
        if fever
        else Tool("finish", "Finish the task with the answer.", "answer", "The answer, as short as possible.", "Finish")
    )
    return ToolSet(
        (
            Tool(
                "search",
                "Search Wikipedia for an exact entity: returns the first paragraph of its page if it "
                "exists, else some similar entities to search.",
                "entity",
                "The exact page title to look up.",
                "Search",
            ),
            Tool(
                "lookup",
                "Return the next sentence containing the keyword in the current page.",
                "keyword",
                "The keyword to find.",
                "Lookup",
            ),
            finish,
        ),
        "bracket",
    )


def command_tools(description: str) -> ToolSet:
    """A text game's one tool: `act(command)`, whose description lists the verbs."""
    return ToolSet((Tool("act", description, "command", "One command, exactly as the game reads it."),), "command")
