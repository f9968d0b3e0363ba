"""The AWS side of ingestion: clients, the local stack, bootstrap, corpus upload, and DLQ redrive."""
