"""The progress display writes plain lines when stderr is a log file."""

from __future__ import annotations

from webagent_r1.progress import Bar


def test_log_lines_when_not_a_terminal(capsys) -> None:
    bar = Bar("BC", 10, every_s=0.0)  # pytest's captured stderr is not a terminal
    assert bar.rich is None
    bar.update(advance=3, info="loss 1.234")
    bar.update(completed=5)
    bar.close()
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0].startswith("BC: 3/10 after") and lines[0].endswith("· loss 1.234")
    assert "min left" in lines[0]
    assert lines[-1].startswith("BC: 5/10")


def test_quiet_between_intervals(capsys) -> None:
    bar = Bar("rollout", 4, every_s=3600.0)
    bar.update(advance=1)
    assert capsys.readouterr().err == ""
    bar.close()  # the last line is always written
    assert capsys.readouterr().err.startswith("rollout: 1/4")
