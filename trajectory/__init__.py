"""The bottom layer: trajectory records (pydantic) and their pure text forms (the paper's
prompt formats and the ReAct release's prompt-file layout). Imports nothing of the project."""
