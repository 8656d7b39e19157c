"""``rigwatch export``: a recording (maybe someone else's) written out as text."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from probes.errors import ConfigError


def run_export(args: argparse.Namespace) -> int:
    """``rigwatch export FILE``: the recording as CSV, OpenMetrics or JSON lines, on stdout
    or into ``-o`` (mode 0600).  Rows the file holds that cannot be read are skipped and
    said once on stderr; a file that fails half-way ends with one line."""
    from probes.outputs.export import export_csv, export_jsonl, export_openmetrics, write_private
    from probes.store.codec import encode
    from probes.store.recording import RecordingError, RecordingReader
    from probes.wire.sanitize import clean_text

    try:
        reader = RecordingReader(args.file)
    except RecordingError as exc:
        raise ConfigError(f"rigwatch: {exc}") from None
    with reader:
        items = reader.items()
        chunks = (export_csv(items) if args.format == "csv" else
                  export_openmetrics(items) if args.format == "prometheus" else
                  export_jsonl(items, encode))  # type: ignore[arg-type]
        try:
            if not args.output:
                sys.stdout.writelines(chunks)
            else:
                write_private(chunks, Path(args.output))
        except RecordingError as exc:  # the file failed half-way (a query out of time)
            raise ConfigError(f"rigwatch: {exc}") from None
        except OSError as exc:
            raise ConfigError(f"rigwatch: {args.output}: cannot write the export: "
                              f"{exc.strerror or exc}") from None
        finally:
            if reader.skipped:  # said once: what the export could not read
                print(f"rigwatch: {reader.skipped} unreadable row"
                      f"{'s' if reader.skipped != 1 else ''} of "
                      f"{clean_text(str(args.file))} skipped (damaged or hostile)",
                      file=sys.stderr)
    return 0
