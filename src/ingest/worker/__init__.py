"""The ingest worker: one handler for AWS Lambda (SQS event source) and the local long-polling worker."""
