"""Run store (run directories + SQLite index, atomic writes, resume) and sweep executors."""
