"""Operations: telemetry spans, Prometheus metrics, log fields and the health report."""
