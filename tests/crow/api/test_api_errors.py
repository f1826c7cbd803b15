"""Every non-2xx answer has the one error shape (the key and org checks: tests/crow/api/test_auth.py)."""

from fastapi.testclient import TestClient

from tests.conftest import assert_error, store_app

INGEST = "/api/v1/ingest/products"


def test_health_docs_and_openapi(client):
    assert client.get("/health").json() == {"status": "ok"}
    assert client.get("/ready").json()["status"] == "ready"
    assert client.get("/docs").status_code == 200
    assert INGEST.replace("products", "{collection}") in client.get("/openapi.json").json()["paths"]


def test_unknown_route_and_wrong_method(client, ha):
    assert_error(client.get("/api/v1/nothing-here", headers=ha), 404, "not_found")
    assert_error(client.get(INGEST, headers=ha), 405, "method_not_allowed")


def test_validation_errors_name_the_field(client, ha):
    error = assert_error(
        client.post(INGEST, params={"mode": "merge"}, headers=ha), 422, "invalid_request"
    )
    assert error["details"][0]["field"] == "query mode"
    assert "query mode" in error["message"]


def test_unexpected_errors_are_500_with_the_shape_and_no_internals(settings, lake, store, ha):

    app = store_app(settings, store)

    @app.get("/boom")
    def boom():
        raise RuntimeError("secret internals")

    with TestClient(app, raise_server_exceptions=False) as c:
        error = assert_error(c.get("/boom", headers=ha), 500, "internal_error")
    assert "secret" not in error["message"]


def test_ready_names_the_dependency_that_does_not_answer(settings, lake, store):

    class Broken:
        async def check_health(self):
            raise RuntimeError("index root missing")

    app = store_app(settings, store, retriever=Broken())
    with TestClient(app) as c:
        error = assert_error(c.get("/ready"), 503, "not_ready")
    assert error["details"] == [
        {"dependency": "retriever", "reason": "RuntimeError: index root missing"}
    ]
