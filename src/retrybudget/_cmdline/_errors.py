"""The command's one error: bad input, reported as one line on stderr with exit status 2."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "EXIT_LEFT_TO_DO", "EXIT_OK", "CliError", "in_option_words",
           "report_bad_input"]

EXIT_OK = 0
"""Everything ran and every operation (or check) succeeded."""

EXIT_FAILED = 1
"""The command ran, but an operation failed or a check found a safeguard absent."""

EXIT_BAD_INPUT = 2
"""Bad input (a file, a URL, an option, a policy, an unreachable Redis): nothing was run."""

EXIT_LEFT_TO_DO = 3
"""``fetch``: operations are left to do (rate-limited until a later time); run it again."""


class CliError(Exception):
    """Bad input. The message is one line that names the file (and line) when there is one.

    It never holds a secret: URLs in it are redacted and header values are never quoted.
    """

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


def in_option_words(message: str, options: Mapping[str, str]) -> str:
    """A configuration error with the option names a user typed (``options``: field -> option)."""
    for field, option in options.items():
        message = re.sub(rf"(?<![-\w]){re.escape(field)}\b", option, message)
    return message


def report_bad_input(prog: str, message: str) -> int:
    """Print ``PROG: MESSAGE`` as one line on stderr; returns :data:`EXIT_BAD_INPUT`."""
    print(f"{prog}: {' '.join(message.split())}", file=sys.stderr)
    return EXIT_BAD_INPUT
