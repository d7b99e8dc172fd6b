"""``python -m tfktopic`` runs the command line (see `tfktopic.cli`)."""

import sys

from tfktopic.cli import main

sys.exit(main())
