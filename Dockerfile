# Brook, a Kafka-compatible broker: `docker build -t brook . && docker run -p 9092:9092 brook`
#
# Two stages: the build stage needs pip's build isolation (setuptools) and the source tree; the
# runtime stage gets only the finished virtual environment, so neither ends up in the image.

FROM python:3.11-slim-bookworm AS build

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

RUN python -m venv /opt/brook

WORKDIR /src
COPY . .
RUN /opt/brook/bin/pip install --no-cache-dir .


# Same base image as the build stage: the venv's interpreter symlinks point at its Python.
FROM python:3.11-slim-bookworm

# A fixed numeric uid/gid lets orchestrators (runAsNonRoot) verify the user and lets a host
# directory mounted on the volume be chowned to match (10001:10001).
RUN groupadd --system --gid 10001 brook \
    && useradd --system --uid 10001 --gid brook --no-create-home \
        --home-dir /var/lib/brook --shell /usr/sbin/nologin brook \
    && mkdir -p /var/lib/brook \
    && chown brook:brook /var/lib/brook

COPY --from=build /opt/brook /opt/brook

# The broker reads BROOK_<KEY> for the Kafka config key <key> (dots become underscores).
# Listen on every interface inside the container; advertise what `-p 9092:9092` reaches from
# the host. Override BROOK_ADVERTISED_LISTENERS when clients connect by another name.
ENV PATH=/opt/brook/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    BROOK_LISTENERS=PLAINTEXT://0.0.0.0:9092 \
    BROOK_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092 \
    BROOK_LOG_DIRS=/var/lib/brook

# Declared after the chown so a fresh named volume inherits the brook user's ownership.
VOLUME ["/var/lib/brook"]
WORKDIR /var/lib/brook
EXPOSE 9092

USER 10001:10001

# Healthy once the first listener accepts TCP connections. Plain Python, so the image needs no
# extra tools; a wildcard bind address is probed on loopback.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import os, socket; listener = os.environ.get('BROOK_LISTENERS', 'PLAINTEXT://:9092').split(',')[0].split('://', 1)[-1]; host, _, port = listener.rpartition(':'); host = host.strip('[]'); host = '127.0.0.1' if host in ('', '0.0.0.0', '::') else host; socket.create_connection((host, int(port)), timeout=2).close()"]

CMD ["brook", "serve"]
