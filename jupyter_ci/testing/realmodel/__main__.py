"""``python -m jupyter_ci.testing.realmodel``: see :mod:`jupyter_ci.testing.realmodel.cli`."""

import sys

from .cli import main

sys.exit(main())
