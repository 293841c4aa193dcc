"""`python -m react_editor`: the `react-editor` command line (react_editor.main)."""

import sys

from react_editor.main import main

sys.exit(main())
