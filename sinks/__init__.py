"""Where data leaves Plait: object storage, file writers, webhook delivery."""
