from tests.django_fixtures import alice, bob, charlie, make_server  # noqa: F401
