"""Export and import: the paper's prompt formats, the original ReAct prompt-file JSON, our
versioned `jsonl` dataset schema, and training data in TRL's formats (chat-sft, dpo, kto,
steps: `training.export_records`). UI and CLI call these."""

from sessions.exchange.export import FORMATS, ExportReport, export
from sessions.exchange.import_report import ImportFailed, ImportReport
from sessions.exchange.importer import IMPORT_FORMATS, import_file
from sessions.exchange.selection import Filters, Ref, SelectionError, parse_ref, select
from sessions.exchange.sink import ExportError
from sessions.exchange.training import TRAINING_FORMATS, export_records
from sessions.exchange.training_options import TrainingOptions

__all__ = [
    "FORMATS",
    "ExportError",
    "ExportReport",
    "export",
    "IMPORT_FORMATS",
    "ImportFailed",
    "ImportReport",
    "import_file",
    "Filters",
    "Ref",
    "SelectionError",
    "parse_ref",
    "select",
    "TRAINING_FORMATS",
    "TrainingOptions",
    "export_records",
]
