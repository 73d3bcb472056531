"""The HTTP libraries' own exceptions and headers, read natively (below the drivers).

A function run by :meth:`~retrybudget.Retrier.call` or ``@retrying`` is usually written the
ordinary way: send, ``raise_for_status()``, decode. What it raises is then the HTTP
library's exception, and this package reads it as what it is:

- an error that carries a response (``httpx.HTTPStatusError``, ``requests.HTTPError``…)
  is that response: its status, the headers the classifier reads, its body text when it was
  already read (bounded), and the method of the request it answered (a failed POST is not
  replayed);
- a transport error (connect, timeout, reset, pool…) is the failure kind the integrations map
  it to, a connect failure being known never to have been sent.

Nothing here imports an HTTP library up front: an exception is recognised by the module of
the classes it derives from, and only that library's reader is imported, when such an
exception is first seen (which proves the library is installed).

The integrations take each library's failure kinds and header evidence from its module
here, and the drivers' :class:`~retrybudget.CallInterpreter` its exception reader: one home
for both, below the drivers that use it.

Each library has a module of its own, named as the library's top-level package (``httpx``
for httpx): its failure kinds, its header evidence and ``read``, its exceptions' reader,
which ``_observe`` finds by that name when one of the library's exceptions is first seen.
Adding a library is adding its module; no list here or elsewhere names them. The private
modules: ``_shared`` (what every reader shares), ``_stdlib`` (the standard library's
network errors), ``_sdks`` (the official SDKs' errors), ``_observe`` (an exception to the
reader of its library) and ``_carry`` (the outcome an object carries).
"""

from __future__ import annotations

from ._carry import OUTCOME, OUTCOME_ATTRIBUTE, Carried, carry, outcome_of
from ._observe import observe_error
from ._sdks import RETRY_COUNT_HEADER, is_sdk_error, sdk_retries_taken
from ._shared import EVIDENCE, evidence, method_of
from ._stdlib import stdlib_failure_kind

__all__ = [
    "EVIDENCE",
    "OUTCOME",
    "OUTCOME_ATTRIBUTE",
    "RETRY_COUNT_HEADER",
    "Carried",
    "carry",
    "evidence",
    "is_sdk_error",
    "method_of",
    "observe_error",
    "outcome_of",
    "sdk_retries_taken",
    "stdlib_failure_kind",
]
