"""The public acceptance cases: load them, build their policies, judge results.

A case scripts what a provider answers and states what a correct client must do
(the packaged ``data/acceptance.json``). The fixture-script format and the in-process
scripted provider sit below this package and the sandbox (``retrybudget._fixtures``; users
import them from :mod:`retrybudget.testing`). The package holds the rest of acceptance:

- the cases (:func:`load_cases`, :func:`policy_for`), the judge (:func:`judge`) and the
  offline runner (:func:`run_offline`), exported here;
- :mod:`~retrybudget.acceptance.checklist`: the checklist over loopback HTTP against the
  sandbox, with the rule scenarios no case covers (``retrybudget check``). It is not
  imported here: it needs the sandbox (the server extra).
"""

from __future__ import annotations

from ._cases import Case, load_cases, policy_for
from ._judge import CaseResult, Check, judge
from ._offline import CaseBreaker, run_offline

__all__ = [
    "Case",
    "CaseBreaker",
    "CaseResult",
    "Check",
    "load_cases",
    "judge",
    "policy_for",
    "run_offline",
]

_CaseCoordinator = CaseBreaker
"""The former private name of :class:`CaseBreaker`."""
