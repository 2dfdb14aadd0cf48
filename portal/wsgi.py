"""WSGI entry point (gunicorn portal.wsgi)."""

import os

from django.conf import settings
from django.core.wsgi import get_wsgi_application

from portal.core.embedded import check_wsgi_key

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
application = get_wsgi_application()
# The public development key serves only `runportal` on loopback (`make run`), never gunicorn.
check_wsgi_key(settings.SECRET_KEY)
