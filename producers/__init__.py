"""What other services use to feed Plait: the producer SDK and data sources."""
