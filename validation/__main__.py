import signal
import sys

from validation.cli import main

# Turn SIGTERM (a cancelled CI job, `timeout`) and SIGHUP (its terminal closed) into SystemExit so
# that cleanups run: scratch namespaces are deleted and the temporary kubeconfigs removed.
for ending in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(ending, lambda signum, frame: sys.exit(128 + signum))
try:
    raise SystemExit(main())
except KeyboardInterrupt:  # Ctrl-C: the exit status a shell gives it, without a traceback
    raise SystemExit(130) from None
