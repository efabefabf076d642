from tests.collectors.live import engine, workers  # noqa: F401
from tests.django_fixtures import alice, bob, charlie, make_server  # noqa: F401
