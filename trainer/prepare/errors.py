"""The two ways a preparation stops early, mapped to exit codes by ``__main__``."""


class UsageError(ValueError):
    """A bad flag or a source that does not match it: exit 2, the message names the flag,
    the value and what is allowed."""


def bad_flag(flag: str, value: object, allowed: str) -> UsageError:
    return UsageError(f"--{flag}={value}: {allowed}")
