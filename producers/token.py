"""Data-token checks for business systems: re-exported from the kernel
(:mod:`plait.tokens`, where Plait mints them) so a data API can keep
``from producers.token import verify_data_token``."""
from plait.tokens import HEADER_DATA_TOKEN, HEADER_TASK_ID, DataTokenError, verify_data_token

__all__ = ["HEADER_DATA_TOKEN", "HEADER_TASK_ID", "DataTokenError", "verify_data_token"]
