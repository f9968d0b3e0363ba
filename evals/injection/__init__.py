"""The prompt-injection evaluation: a labelled set split once into dev and held-out parts (data/README.md),
the old scanner and the new detector measured side by side (`python -m evals.injection`, report.md)."""
