"""`python -m gateway`. Imports are absolute and the command runs only as the main module: worker
processes (anyio's, for grammar checks) import this file again under another name."""

import sys

from gateway.cli import main

if __name__ == "__main__":
    sys.exit(main())
