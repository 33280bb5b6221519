"""``python -m kbroker`` is the ``kbroker`` command."""

import sys

from kbroker.launcher import main

sys.exit(main())
