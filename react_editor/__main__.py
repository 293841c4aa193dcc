from react_editor.main import main
import sys

sys.exit(main())
