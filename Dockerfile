FROM python:3.11.10-slim
WORKDIR /app
# pdf exports embed this font for CJK text (sinks/writers/pdf_writer.py)
RUN apt-get update && apt-get install -y --no-install-recommends fonts-wqy-zenhei \
    && rm -rf /var/lib/apt/lists/*
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
