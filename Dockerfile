# The portal's own image, as deploy/kubernetes runs it (web, worker, beat, migrations):
#   docker build -t gpu-portal .
# Two stages: the build stage installs the runtime requirements into a virtualenv (as `make install`
# does) and collects the static files; the final stage carries only the virtualenv and the code, and
# runs as the non-root uid the manifests expect.
FROM python:3.11-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /app
COPY requirements.txt .
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir -r requirements.txt \
    && /opt/venv/bin/pip check
COPY . .
RUN STATIC_ROOT=/app/staticfiles /opt/venv/bin/python manage.py collectstatic --noinput -v 0

FROM python:3.11-slim-bookworm
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    STATIC_ROOT=/app/staticfiles
RUN groupadd --gid 10001 portal \
    && useradd --uid 10001 --gid portal --no-create-home --shell /usr/sbin/nologin portal
COPY --from=build /opt/venv /opt/venv
COPY --from=build /app /app
WORKDIR /app
USER 10001
EXPOSE 8000
CMD ["gunicorn", "portal.wsgi", "--bind", "0.0.0.0:8000"]
