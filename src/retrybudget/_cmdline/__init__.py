"""What every command shares (``retrybudget``, ``python -m retrybudget.sandbox`` and
``python -m retrybudget.gateway``): the one bad-input error and its exit statuses, the
argparse types, and the checks on files a command will write.

It sits below the commands that use it and imports only the standard library and
:mod:`retrybudget._files`.
"""

from ._errors import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_LEFT_TO_DO,
    EXIT_OK,
    CliError,
    in_option_words,
    report_bad_input,
)
from ._paths import cannot_listen, check_new_file, check_sqlite_file, os_reason
from ._types import (
    LOG_LEVELS,
    count,
    log_level,
    non_negative_int,
    number,
    port,
    positive_float,
    positive_int,
    seconds,
    share,
)

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_FAILED",
    "EXIT_LEFT_TO_DO",
    "EXIT_OK",
    "LOG_LEVELS",
    "CliError",
    "cannot_listen",
    "check_new_file",
    "check_sqlite_file",
    "count",
    "in_option_words",
    "log_level",
    "non_negative_int",
    "number",
    "os_reason",
    "port",
    "positive_float",
    "positive_int",
    "report_bad_input",
    "seconds",
    "share",
]
