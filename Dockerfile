# One Dockerfile, two images (docker-compose.yml builds both):
#   target `app`:    the dashboard's web (gunicorn + WhiteNoise), Celery worker and beat: one image, three commands.
#   target `engine`: the bundled DDTree engine (torch). PyPI's torch wheel carries CUDA and also runs on CPU,
#                    so the GPU service and the CPU profile share it.
# Dependencies are the pinned extras of pyproject.toml; nothing else is downloaded.
FROM python:3.11-slim-bookworm AS base
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
RUN useradd --system --uid 10001 --home-dir /app --shell /usr/sbin/nologin spectator

FROM base AS app
COPY pyproject.toml manage.py docker-entrypoint.sh ./
COPY engine_client ./engine_client
COPY collectors ./collectors
COPY dashboard ./dashboard
RUN pip install -e '.[dashboard]'
# Static files are built into the image (outside the data volume) and served by WhiteNoise.
ENV SPECTATOR_STATIC_ROOT=/app/static SPECTATOR_DATA_DIR=/data SPECTATOR_METRICS_DIR=/metrics
RUN python manage.py collectstatic --noinput --verbosity 0 \
    && mkdir -p /data /metrics && chown -R spectator /data /metrics
USER spectator
EXPOSE 8000
ENTRYPOINT ["/app/docker-entrypoint.sh"]
CMD ["gunicorn", "dashboard.wsgi", "--bind", "0.0.0.0:8000", "--access-logfile", "-", "--no-control-socket"]

FROM base AS engine
COPY pyproject.toml ./
COPY engine ./engine
RUN pip install -e '.[engine]'
USER spectator
EXPOSE 30000
# Flags come from ENGINE_* variables (engine/server/config.py): model, device, host, port, budget…
CMD ["python", "-m", "engine", "serve"]
