"""``python -m scratchformer.train``: the command line (:mod:`scratchformer.train.cli`)."""

import sys

from .cli import main

sys.exit(main())
