"""Data-token checks for business systems, re-exported from :mod:`plait.tokens`."""
from plait.tokens import HEADER_DATA_TOKEN, HEADER_TASK_ID, DataTokenError, verify_data_token

__all__ = ["HEADER_DATA_TOKEN", "HEADER_TASK_ID", "DataTokenError", "verify_data_token"]
