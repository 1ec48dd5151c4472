import sys

from jg_mcp.cli import main

sys.exit(main())
