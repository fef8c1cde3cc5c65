"""`python -m scripts.soak`: Locust (imported first, so gevent patches the standard
library before anything else opens a socket) drives the soak in scripts/soak/run.py."""

import sys

import locust  # noqa: F401

from scripts.soak.run import main

sys.exit(main())
