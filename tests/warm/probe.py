"""A process that says what it is (for tests/test_warm_python.py): parent, session, argv, working
directory, one environment variable, the interpreter's streams, its stop signals' handlers;
then sleeps or exits as asked."""

import json
import os
import signal
import sys
import time

from tests.warm.popen import INHERITED_SIGNALS

print(json.dumps({"ppid": os.getppid(), "sid": os.getsid(0), "pid": os.getpid(),
                  "argv": sys.argv[1:], "cwd": os.getcwd(), "marker": os.environ.get("MARKER"),
                  "path0": sys.path[0], "torch": "torch" in sys.modules,
                  "signals": {s.name: repr(signal.getsignal(s)) for s in INHERITED_SIGNALS}}),
      flush=True)
print("to stderr", file=sys.stderr, flush=True)
if "--sleep" in sys.argv:
    time.sleep(60)
sys.exit(int(sys.argv[sys.argv.index("--exit") + 1]) if "--exit" in sys.argv else 0)
