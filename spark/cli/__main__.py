"""``python -m colmz.spark.cli ...``: the ``colmz`` command."""

import sys

from colmz.spark.cli import main

sys.exit(main())
