"""`python -m react_editor`: the `react-editor` command line (react_editor.main)."""

from react_editor.main import main
import sys

sys.exit(main())
