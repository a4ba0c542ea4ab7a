# Brook, a Kafka-compatible broker:
#   docker build -t brook . && docker run -p 9092:9092 brook
# (with podman: `podman build --format docker`, or the HEALTHCHECK is dropped). README.md's
# "Docker" section shows a host port other than 9092, volumes and the image's uid.
#
# The base is Debian's own Python 3.11 on debian:bookworm-slim rather than the python image:
# Debian's python3.11 packages come without pip and setuptools, so the shipped image holds
# neither, and the test suite can make this base itself (mmdebstrap, tests/docker/).

# The runtime every stage shares: Python 3.11 and the broker's user. Pinned to Debian 12's
# Python (3.11.2); the wildcard follows Debian's security updates of it.
FROM debian:bookworm-slim AS python

RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        "python3.11-minimal=3.11.2-6+deb12u*" \
        "libpython3.11-stdlib=3.11.2-6+deb12u*" \
    && rm -rf /var/lib/apt/lists/*

# A fixed numeric uid/gid lets orchestrators (runAsNonRoot) verify the user and lets a host
# directory mounted on the volume be chowned to match (10001:10001).
RUN groupadd --system --gid 10001 brook \
    && useradd --system --uid 10001 --gid brook --no-create-home \
        --home-dir /var/lib/brook --shell /usr/sbin/nologin brook \
    && mkdir -p /var/lib/brook \
    && chown brook:brook /var/lib/brook


# The build stage alone has venv's pip and setuptools (python3.11-venv) and the source tree.
FROM python AS build

RUN apt-get update \
    && apt-get install -y --no-install-recommends "python3.11-venv=3.11.2-6+deb12u*" \
    && rm -rf /var/lib/apt/lists/*

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

RUN python3.11 -m venv /opt/brook

WORKDIR /src
COPY . .
# pip builds Brook with setuptools in an isolated environment of its own; once the venv is
# complete, pip and the setuptools that venv seeded go, so the runtime image gets neither.
# Behind a proxy that intercepts TLS (a company's, a CI sandbox's), pip must also trust the
# proxy's CA: pass it as a build secret, `docker build --secret id=extra_ca,src=ca.pem .`
# (podman build takes the same flag). It joins the CAs pip trusts for this step only: no
# layer keeps it.
RUN --mount=type=secret,id=extra_ca,required=false \
    if [ -s /run/secrets/extra_ca ]; then \
        cat "$(/opt/brook/bin/python -c 'import pip._vendor.certifi as c; print(c.where())')" \
            /run/secrets/extra_ca > /tmp/pip-ca.pem \
        && export PIP_CERT=/tmp/pip-ca.pem; \
    fi \
    && /opt/brook/bin/pip install --no-cache-dir . \
    && /opt/brook/bin/pip uninstall --yes pip setuptools \
    && rm -f /tmp/pip-ca.pem


FROM python

# The venv's interpreter is a symlink to /usr/bin/python3.11, which this stage has too.
COPY --from=build /opt/brook /opt/brook
COPY docker/entrypoint.sh /usr/local/bin/brook-entrypoint

# The broker reads BROOK_<KEY> for the Kafka config key <key> (dots become underscores).
# Two listeners, as Kafka's and Redpanda's images have: PLAINTEXT on 9092 for clients on the
# host (through `-p 9092:9092`) and DOCKER on 29092 for clients in other containers of the
# same network, which also carries the traffic between brokers. advertised.listeners is left
# to the entrypoint: unset, it advertises PLAINTEXT://localhost:9092 and
# DOCKER://<the container's hostname>:29092, a name Docker's DNS resolves on user-defined
# networks. With another host port (-p 39092:9092) or another name, set it whole:
# BROOK_ADVERTISED_LISTENERS=PLAINTEXT://localhost:39092,DOCKER://brook:29092.
# A test broker: fault injection is on, served only once the admin endpoint is turned on
# (BROOK_ADMIN_LISTENER); a deployment that turns it on for /metrics sets it false.
ENV PATH=/opt/brook/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    BROOK_LISTENERS=PLAINTEXT://0.0.0.0:9092,DOCKER://0.0.0.0:29092 \
    BROOK_LISTENER_SECURITY_PROTOCOL_MAP=PLAINTEXT:PLAINTEXT,DOCKER:PLAINTEXT \
    BROOK_INTER_BROKER_LISTENER_NAME=DOCKER \
    BROOK_LOG_DIRS=/var/lib/brook \
    BROOK_ADMIN_FAULT_INJECTION_ENABLE=true

# Declared after the chown so a fresh named volume inherits the brook user's ownership.
VOLUME ["/var/lib/brook"]
WORKDIR /var/lib/brook
EXPOSE 9092 29092

USER 10001:10001

# Healthy once the first listener (PLAINTEXT) accepts TCP connections: the broker binds every
# listener before it serves any, so the first stands for all. Probing DOCKER too would make the
# broker warn at each start that a client reached it at 127.0.0.1 rather than at the hostname
# it advertises. With the admin endpoint on (BROOK_ADMIN_LISTENER=http://0.0.0.0:9644), the
# broker's own readiness instead: GET /v1/ready answers 200 once its logs are loaded, its
# listeners bound and (in a cluster) it is registered and caught up, 503 otherwise. Plain
# Python, so the image needs no extra tools; a wildcard bind address is probed on loopback.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import os, socket, urllib.request; admin = os.environ.get('BROOK_ADMIN_LISTENER', '').strip().rstrip('/').replace('//0.0.0.0:', '//127.0.0.1:').replace('//[::]:', '//127.0.0.1:'); listener = os.environ.get('BROOK_LISTENERS', 'PLAINTEXT://:9092').split(',')[0].split('://', 1)[-1]; host, _, port = listener.rpartition(':'); host = host.strip('[]'); host = '127.0.0.1' if host in ('', '0.0.0.0', '::') else host; urllib.request.urlopen(admin + '/v1/ready', timeout=2).close() if admin else socket.create_connection((host, int(port)), timeout=2).close()"]

# The entrypoint defaults advertised.listeners (above), checks that the data directories are
# writable (a bind-mounted host directory often is not) and says what to do, then runs the
# command as PID 1.
ENTRYPOINT ["brook-entrypoint"]
CMD ["brook", "serve"]
