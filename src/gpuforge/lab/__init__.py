"""The lab: podman containers that stand in for GPU servers (docs/lab.md)."""
