"""`python -m rulekit`: the `rulekit` command line (see `python -m rulekit --help`)."""

from __future__ import annotations

import sys

from rulekit._cli import main

if __name__ == "__main__":
    sys.exit(main())
