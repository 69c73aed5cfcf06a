"""``python -m trainer.prepare``: exit 0 once layout.json is written, 2 on a bad flag, 1 on failure."""

import sys
import traceback

from trainer.prepare.cli import parse
from trainer.prepare.errors import UsageError
from trainer.prepare.source import find


def main(argv: list) -> int:
    try:
        opts = parse(argv)
        found = find(opts.source, opts.dataset, opts.days)
        from trainer.prepare.run import prepare  # after the checks: a bad flag exits at once

        prepare(opts, found)
    except UsageError as err:
        print(f"python -m trainer.prepare: error: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # noqa: BLE001 - one line for the Job's log, then the details
        traceback.print_exc()
        print(f"prepare: failed: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
