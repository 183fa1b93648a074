"""Set up Django for a benchmark script run as `python bench/NAME.py` from the repository root."""

import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalproject.settings")


def setup(*, fresh_database: bool = False) -> None:
    """Configure Django; with fresh_database, on a new SQLite file in a temporary folder, catalogue loaded."""
    if fresh_database:
        import tempfile

        os.environ["EVAL_DATA_DIR"] = tempfile.mkdtemp(prefix="eval-bench-")
        os.environ.pop("DATABASE_URL", None)
    import django

    django.setup()
    if fresh_database:
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        call_command("load_catalog", stdout=open(os.devnull, "w"))


def percentile(values: list[float], q: int) -> float:
    """The q-th percentile (1-99) by statistics.quantiles' inclusive method: the samples are taken
    as the whole population and cut points are interpolated between them, so the p99 of 100 samples
    lies between the two largest instead of being the largest."""
    if not 1 <= q <= 99:
        raise ValueError(f"percentile: q must be 1 to 99, not {q}")
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def summary(label: str, values_ms: list[float]) -> str:
    return (
        f"{label:<34} median {statistics.median(values_ms):7.3f} ms   p99 {percentile(values_ms, 99):7.3f} ms"
        f"   (n={len(values_ms)})"
    )
