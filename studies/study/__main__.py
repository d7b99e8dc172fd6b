"""``python -m studies.study ...``: the study's command line (`studies.study.scheduler.main`)."""

import sys

from studies.study.scheduler import main

if __name__ == "__main__":
    sys.exit(main())
