"""What rigwatch writes for people and programs: exports, the metrics endpoint, incident
reports, manifests and snapshots."""
