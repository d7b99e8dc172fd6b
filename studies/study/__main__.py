"""``python -m studies.study ...``: the study's command line (`studies.study.protocol.main`)."""

import sys

from studies.study.protocol import main

if __name__ == "__main__":
    sys.exit(main())
