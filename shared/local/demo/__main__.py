"""`python -m shared.local.demo` (what `make demo` runs)."""

import sys

from shared.local.demo.cli import main

sys.exit(main())
