"""``python -m semantics``: the same as the console script ``serq-ref``."""

import sys

from .cli import main

sys.exit(main())
