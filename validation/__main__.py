import signal
import sys

from validation.cli import main

# Turn SIGTERM (a cancelled CI job, `timeout`) into SystemExit so that cleanups
# run: scratch namespaces are deleted and the temporary kubeconfigs removed.
signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
raise SystemExit(main())
