"""/health answers 503 with a body while the model loads, 200 once it is ready."""

from __future__ import annotations

from tests.engine.server.helpers import Server


def test_it_answers_503_with_a_body_before_the_model_is_loaded(server: Server) -> None:
    loading = [(code, body) for code, body in server.health_seen if code != 200]
    assert loading, "the fixture never saw /health before the model loaded"
    for code, body in loading:
        assert code == 503
        assert body["status"] == "loading" and body["message"]


def test_it_answers_200_after_the_model_is_loaded(server: Server) -> None:
    assert server.health_seen[-1] == (200, {"status": "ok"})
    with server.client() as c:
        assert c.get("/health").status_code == 200
