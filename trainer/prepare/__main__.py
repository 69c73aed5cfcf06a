"""``python -m trainer.prepare``: exit 0 once layout.json is written, 2 on a bad flag, 1 on a
failure that outlived its retries.

A failure other than a bad flag is retried in this process, after 1x, 2x, 4x, 8x
--retry_seconds (2, 4, 8, 16 min: 30 min in all): each attempt skips the days already done, and
a role granted by the same `pulumi up` can take minutes to reach the storage service (Azure:
"up to 10 minutes", more in some reports; IAM is "eventually consistent"). So exit 1 and 2 are
final: the Job fails at once on them, and the failure is recorded for the training pods
(trainer/prepare/status.py), even one from parsing the flags or importing this program's parts.
A worker killed for memory surfaces here as BrokenProcessPool and is retried the same way.
"""

import sys
import time
import traceback
from typing import Optional

from trainer.prepare import status  # these two use the standard library only
from trainer.prepare.errors import UsageError

FAILED = 1
BAD_FLAG = 2  # trainer.exit_codes.CONFIG_ERROR: the Job's policy fails at once on it


def output_flag(argv: list) -> Optional[str]:
    """--output as given, read before anything can fail, so every failure can be recorded."""
    for i, arg in enumerate(argv):
        if arg.startswith("--output="):
            return arg.split("=", 1)[1] or None
        if arg == "--output" and i + 1 < len(argv):
            return argv[i + 1]
    return None


def attempt(opts) -> None:
    from trainer.prepare.source import find

    found = find(opts.source, opts.dataset, opts.days)
    from trainer.prepare.run import prepare  # after the checks: a bad flag exits at once

    prepare(opts, found)


def run_with_retries(argv: list) -> None:
    from trainer.prepare.cli import parse

    opts = parse(argv)
    for tries in range(opts.retries + 1):
        try:
            attempt(opts)
            return
        except UsageError:
            raise
        except Exception as err:  # noqa: BLE001 - retried, the last one reported by main
            if tries == opts.retries:
                raise
            wait = opts.retry_seconds * 2 ** tries
            traceback.print_exc()
            print(f"prepare: attempt {tries + 1} of {opts.retries + 1} failed: {err}; "
                  f"retrying in {wait:g} s (finished days are kept)", flush=True)
            time.sleep(wait)


def main(argv: list) -> int:
    output = output_flag(argv)
    if output is not None:
        status.clear_failure(output)
    try:
        if output is None:  # parse() names the missing flag
            run_with_retries(argv)
        else:
            with status.Heartbeat(output):
                run_with_retries(argv)
        return 0
    except UsageError as err:
        code, message = BAD_FLAG, f"python -m trainer.prepare: error: {err}"
    except Exception as err:  # noqa: BLE001 - one line for the Job's log, then the details
        traceback.print_exc()
        code, message = FAILED, f"prepare: failed: {type(err).__name__}: {err}"
    print(message, file=sys.stderr)
    if output is not None:
        status.record_failure(output, code, message)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
