# One image for the controller (`tidb-bench operator`, the default) and the benchmark
# runner (`tidb-bench runner ...`, what the Jobs run), with Debian's sysbench 1.0.20.
# Base pinned to an exact Python patch release on Debian 12 (bookworm).
# numpy and scipy (the statistics) add 216 MB installed; their own test suites, 49 MB of
# that, are removed in the build stage (nothing imports them), leaving 167 MB.

FROM python:3.11.10-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator ./operator
RUN python -m venv /opt/tidb-bench \
 && /opt/tidb-bench/bin/pip install --no-cache-dir --upgrade pip==24.2 \
 && /opt/tidb-bench/bin/pip install --no-cache-dir . \
 && find /opt/tidb-bench/lib/python3.11/site-packages/numpy \
         /opt/tidb-bench/lib/python3.11/site-packages/scipy \
         -depth -type d -name tests -exec rm -rf {} +

FROM python:3.11.10-slim-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends sysbench=1.0.20+ds-5 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 65532 tidb-bench \
 && useradd --system --uid 65532 --gid 65532 --home-dir /nonexistent --shell /usr/sbin/nologin tidb-bench
COPY --from=build /opt/tidb-bench /opt/tidb-bench
ENV PATH=/opt/tidb-bench/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
EXPOSE 8080 9090
ENTRYPOINT ["tidb-bench"]
CMD ["operator"]
