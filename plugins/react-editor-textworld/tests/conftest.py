"""The plugin's tests run from a checkout: the plugin and the host project on the path."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for path in (HERE.parent, HERE.parent.parent.parent):  # the plugin, then ReAct Editor
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
