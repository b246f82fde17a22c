FROM python:3.11.10-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY plait plait
COPY streams streams
COPY producers producers
COPY sinks sinks
COPY alerting alerting
COPY api api
COPY schedules schedules
COPY ops ops
COPY schedules schedules
RUN pip install --no-cache-dir .
