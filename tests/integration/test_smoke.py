import pytest

from ratelimits.models import Policy


@pytest.mark.django_db
def test_demo_endpoint_is_limited(client):
    Policy.objects.create(
        name="items", endpoint="api:items", algorithm="fixed_window", limit=2, window=3600
    )
    codes = [client.get("/api/items/").status_code for _ in range(3)]
    assert codes == [200, 200, 429]
