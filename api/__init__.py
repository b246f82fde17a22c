"""The FastAPI service: export tasks, progress, downloads, health, metrics."""
