"""``python -m sk_softmix compare``: see :mod:`sk_softmix._compare`."""

import sys

from ._compare import main

sys.exit(main())
