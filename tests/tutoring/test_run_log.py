"""run.log: one line an event, stamped with the UTC time to the millisecond, whole after every line."""

import time
from datetime import UTC, datetime, timedelta

from evaluation.tutoring.client import RunLog


def stamps(path):
    lines = path.read_text(encoding="utf-8").splitlines()
    return [(datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC), line[24:]) for line in lines]


def test_every_line_carries_the_time_it_was_written(tmp_path):
    log = RunLog(tmp_path / "run" / "run.log")
    before = datetime.now(UTC)
    log("first")
    time.sleep(0.0105)  # later within the same second, or in the next one: both stamps must follow the clock
    log("second")
    after = datetime.now(UTC)
    # Each line is on disk as soon as it is written, before close(): a killed worker leaves it whole.
    written = stamps(tmp_path / "run" / "run.log")
    log.close()
    assert [event for _, event in written] == ["first", "second"]
    first, second = (stamp for stamp, _ in written)
    slack = timedelta(milliseconds=1)  # the stamps are cut to the millisecond
    assert before - slack <= first <= second <= after
    assert second - first >= timedelta(milliseconds=9)


def test_a_line_in_the_next_second_is_stamped_with_it(tmp_path):
    log = RunLog(tmp_path / "run.log")
    log("before")
    time.sleep(1.0 - time.time() % 1.0 + 0.002)  # just past the next whole second
    written_after = datetime.now(UTC)
    log("after")
    log.close()
    (first, _), (second, _) = stamps(tmp_path / "run.log")
    assert second.replace(microsecond=0) > first.replace(microsecond=0)  # not the earlier second's stamp
    assert written_after - timedelta(milliseconds=1) <= second <= datetime.now(UTC)
