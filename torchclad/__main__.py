"""``python -m torchclad``: the command line (see :mod:`torchclad.cli`)."""

import sys

from torchclad.cli import main

sys.exit(main())
