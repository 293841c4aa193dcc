"""Where the Wikipedia families' built-in prompt files live (one place, read by the family
definitions and written by the exemplar builder)."""

from pathlib import Path

DATA_DIR = Path(__file__).parent / "data"
PROMPTS_FILES = {"hotpotqa": DATA_DIR / "prompts.json", "fever": DATA_DIR / "fever_prompts.json"}
