"""A Prometheus that scrapes dcgm-exporter (or rigwatch's own exporter) as a fleet source."""
