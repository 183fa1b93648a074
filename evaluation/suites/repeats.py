"""Cases run k times: pass^k (every repeat passed) and the pass rate with its 95% interval.

An LLM agent and an LLM judge are noisy, so one PASS says little about a flaky case. With k
repeats a case passes only when all k do (pass^k, the strict reading), and its pass rate is
reported with a Wilson score interval (scipy's binomtest), which stays inside 0-1 and is sound
for the small k a suite affords.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

# scipy is imported where it is used: it takes longer to import than the rest of the app.


class Outcome(Protocol):
    """One repeat of one case: the runner's CaseResult, or a stored result row."""

    @property
    def passed(self) -> bool: ...


@dataclass(frozen=True)
class CaseSummary:
    suite: str
    case: str
    passes: int
    """Repeats that passed."""
    k: int
    """Repeats run."""
    ci_low: float
    ci_high: float
    """The 95% Wilson interval of the pass rate."""

    @property
    def pass_k(self) -> bool:
        """pass^k: every one of the k repeats passed."""
        return self.k > 0 and self.passes == self.k

    @property
    def rate(self) -> float:
        return self.passes / self.k if self.k else 0.0

    def line(self) -> str:
        mark = "PASS" if self.pass_k else "FAIL"
        return (
            f"pass^{self.k} {mark} {self.suite}: {self.case}  {self.passes}/{self.k} passed, "
            f"mean {self.rate:.2f} (95% CI {self.ci_low:.2f}-{self.ci_high:.2f})"
        )


def summarize(suite: str, case: str, outcomes: Iterable[Outcome]) -> CaseSummary:
    results = list(outcomes)
    k, passes = len(results), sum(bool(r.passed) for r in results)
    if k == 0:
        return CaseSummary(suite, case, 0, 0, 0.0, 1.0)
    from scipy.stats import binomtest

    interval = binomtest(passes, k).proportion_ci(confidence_level=0.95, method="wilson")
    return CaseSummary(suite, case, passes, k, float(interval.low), float(interval.high))
