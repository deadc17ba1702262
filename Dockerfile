# The jobs image: `jobs worker` by default; the same image runs `jobs api` (docker-compose.yml).
# Installs the project from this checkout only (pyproject.toml pins temporalio); nothing is
# downloaded at run time.

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/jobs
WORKDIR /src
COPY pyproject.toml README.md worker.py ./
COPY workflows ./workflows
COPY activities ./activities
COPY starter ./starter
COPY connection ./connection
# jobctl/ links the folders above into the one package that installs (pyproject.toml).
COPY jobctl ./jobctl
RUN /opt/jobs/bin/pip install .

FROM python:3.11-slim
# A fixed non-root uid/gid, so volume permissions and pod security policies can name it.
RUN groupadd --system --gid 10001 jobs \
    && useradd --system --uid 10001 --gid jobs --create-home --home-dir /home/jobs \
       --shell /usr/sbin/nologin jobs
COPY --from=build /opt/jobs /opt/jobs
ENV PATH=/opt/jobs/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /home/jobs
USER 10001:10001
EXPOSE 8000
# SIGTERM: the worker stops polling and gives running attempts JOBS_SHUTDOWN_GRACE (30 s).
STOPSIGNAL SIGTERM
CMD ["jobs", "worker"]
