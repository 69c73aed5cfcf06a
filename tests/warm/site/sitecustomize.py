"""Loaded at start-up by a test's Python process whose PYTHONPATH names this folder (a gang
pod's launcher, started by `sh -c`): its torchrun ranks are forked by the warm server."""

import os

if os.environ.get("WARM_PYTHON_SOCKET"):
    try:
        from tests.warm.popen import install
    except ImportError:  # the repository is not on the path: start processes the ordinary way
        pass
    else:
        install(os.environ["WARM_PYTHON_SOCKET"])
