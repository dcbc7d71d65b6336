"""Where the project's shared material is: ``../shared`` next to the repository
(the oracle answers, the traces), as on a developer's machine and in CI;
SERQ_SHARED overrides it."""

import os
from pathlib import Path

SHARED = Path(os.environ.get("SERQ_SHARED", Path(__file__).resolve().parent.parent.parent / "shared"))
