# kcoord gateway image (used by compose.yaml).
FROM python:3.11-slim
WORKDIR /opt/kcoord
COPY pyproject.toml README.md ./
COPY coordinator ./coordinator
COPY records ./records
COPY migration ./migration
COPY ops ./ops
RUN pip install --no-cache-dir .
EXPOSE 9092 9093 9404
ENTRYPOINT ["kcoord"]
CMD ["serve", "--listen", "0.0.0.0:9092", "--advertised-host", "localhost"]
