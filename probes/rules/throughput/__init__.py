"""Training throughput read from trainers' progress lines: a series per job log.

:mod:`.readings` knows each trainer's progress line (one :class:`Reading` per line);
:mod:`.series` gathers a log's readings into one series in one unit, with its summary.
"""

from probes.rules.throughput.readings import Reading, read_line
from probes.rules.throughput.series import Seen, ThroughputSeries, assemble, collect, series_of

__all__ = ["Reading", "Seen", "ThroughputSeries", "assemble", "collect", "read_line",
           "series_of"]
