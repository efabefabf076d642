from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from collectors.models import Server

pytestmark = pytest.mark.django_db


def test_it_accepts_http_and_https_urls(make_server: Any) -> None:
    make_server("a", "http://10.0.0.5:30000").full_clean()
    make_server("b", "https://llm.example.org").full_clean()


@pytest.mark.parametrize("url", ["ftp://10.0.0.5", "javascript:alert(1)", "10.0.0.5:30000", ""])
def test_it_rejects_other_url_schemes(url: str) -> None:
    with pytest.raises(ValidationError) as info:
        Server(name="x", base_url=url).full_clean()
    assert "base_url" in info.value.message_dict


@pytest.mark.parametrize(
    "plan, problem",
    [
        ({"contexts": []}, "must not be empty"),
        ({"contexts": [8]}, "between 16"),
        ({"contexts": [10**7]}, "between 16"),
        ({"n1": 64, "n2": 64}, "n1 < n2"),
        ({"repeats": 0}, "repeats"),
        ({"outputs": [32], "n1": 64, "n2": 128}, "longer than n1"),
        ({"bogus": 1}, "unknown keys"),
        ({"stream_check": "yes"}, "stream_check"),
    ],
)
def test_it_keeps_probe_plans_within_bounds(plan: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValidationError) as info:
        Server(name="x", base_url="http://localhost:8000", probe_plan=plan).full_clean()
    assert problem in " ".join(info.value.message_dict["probe_plan"])


def test_it_accepts_a_small_plan() -> None:
    plan = {"contexts": [64, 256], "outputs": [], "n1": 16, "n2": 64, "repeats": 1}
    Server(name="x", base_url="http://localhost:8000", probe_plan=plan).full_clean()


def test_it_keeps_the_api_key_out_of_str_and_repr(make_server: Any) -> None:
    server = make_server(api_key="sk-very-secret")
    assert "sk-very-secret" not in str(server)
    assert "sk-very-secret" not in repr(server)


def test_it_keeps_the_api_key_out_of_the_engine_client_repr(make_server: Any) -> None:
    from collectors.clients import client_for

    client = client_for(make_server(api_key="sk-very-secret"))
    try:
        assert "sk-very-secret" not in repr(client)
    finally:
        client.close()
