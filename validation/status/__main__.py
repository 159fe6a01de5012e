"""python -m validation.status (validation/status/cli.py)."""

import signal
import sys

from validation.status.cli import main

if __name__ == "__main__":
    # SIGTERM, and SIGHUP when the terminal of a --watch closes, become SystemExit, so the temporary
    # kubeconfigs are removed (as in validation/__main__.py).
    for ending in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(ending, lambda signum, frame: sys.exit(128 + signum))
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:  # the way out of --watch
        raise SystemExit(130) from None
