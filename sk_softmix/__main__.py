"""``python -m sk_softmix compare``: see :mod:`sk_softmix.study`."""

import sys

from .study import main

sys.exit(main())
