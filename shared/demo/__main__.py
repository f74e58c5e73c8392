"""`python -m shared.demo` (what `make demo` runs)."""

import sys

from shared.demo.cli import main

sys.exit(main())
