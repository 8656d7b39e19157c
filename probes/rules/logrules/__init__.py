"""Rules that read logs: kernel (``syslog`` step), NCCL (``nccl``), training (``model``)."""
