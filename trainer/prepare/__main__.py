"""``python -m trainer.prepare``: exit 0 once layout.json is written, 2 on a bad flag, 1 on a
failure that outlived its retries.

A failure other than a bad flag is retried in this process, after 1x, 2x, 4x ... --retry_seconds:
each attempt skips the days already done, and a credential granted by the same `pulumi up`
can take minutes to reach the storage service (Azure RBAC up to 10 minutes, IAM "eventually
consistent"). So exit 1 and 2 are final: the Job fails at once on them, and the failure is
recorded for the training pods (trainer/prepare/status.py). A worker killed for memory surfaces
here as BrokenProcessPool and is retried the same way.
"""

import sys
import time
import traceback

from trainer.prepare import status
from trainer.prepare.cli import Options, parse
from trainer.prepare.errors import UsageError
from trainer.prepare.source import find

FAILED = 1
BAD_FLAG = 2  # trainer.exit_codes.CONFIG_ERROR: the Job's policy fails at once on it


def attempt(opts: Options) -> None:
    found = find(opts.source, opts.dataset, opts.days)
    from trainer.prepare.run import prepare  # after the checks: a bad flag exits at once

    prepare(opts, found)


def main(argv: list) -> int:
    output = None
    try:
        opts = parse(argv)
        output = opts.output
        status.clear_failure(output)
        for tries in range(opts.retries + 1):
            try:
                attempt(opts)
                return 0
            except UsageError:
                raise
            except Exception as err:  # noqa: BLE001 - retried, then reported below
                if tries == opts.retries:
                    raise
                wait = opts.retry_seconds * 2 ** tries
                traceback.print_exc()
                print(f"prepare: attempt {tries + 1} of {opts.retries + 1} failed: {err}; "
                      f"retrying in {wait:g} s (finished days are kept)", flush=True)
                time.sleep(wait)
    except UsageError as err:
        message = f"python -m trainer.prepare: error: {err}"
        print(message, file=sys.stderr)
        if output is not None:
            status.record_failure(output, BAD_FLAG, message)
        return BAD_FLAG
    except Exception as err:  # noqa: BLE001 - one line for the Job's log, then the details
        traceback.print_exc()
        message = f"prepare: failed: {type(err).__name__}: {err}"
        print(message, file=sys.stderr)
        if output is not None:
            status.record_failure(output, FAILED, message)
        return FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
