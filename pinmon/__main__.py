"""``python -m pinmon``: the same as the ``pinmon`` command."""
import sys

from .cli import main

sys.exit(main())
