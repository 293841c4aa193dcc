"""The paper's two transcript layouts as families use them: `CommandTranscript` (one line
per turn, a thought is the turn `think: ...`: ALFWorld, and any text game) and
`NumberedTranscript` (Thought i / Action i / Observation i: HotpotQA, FEVER). A family makes
one with its own instruction, exemplar keys and signal rules; the pure render/parse
functions underneath are `trajectory.formats` and `trajectory.prompt_files`."""

from envs.transcript.command import CommandTranscript, KeyScheme
from envs.transcript.numbered import NumberedTranscript

__all__ = ["CommandTranscript", "KeyScheme", "NumberedTranscript"]
