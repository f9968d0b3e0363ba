"""Measured reliability: load from concurrent MCP clients, a soak, and faults (the database restarted, the
embedding endpoint down, the local AWS down, the worker killed at each stage of an upsert).

    python -m reliability          # everything, into reliability/report.md (about 25 minutes on 2 cores)
"""
