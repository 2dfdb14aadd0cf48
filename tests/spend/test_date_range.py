"""Spend reports cover years 2000 to 2999: a date outside is a form error or a 400, not a 500
(9999-12-31 plus the day that makes the end inclusive overflowed)."""

from __future__ import annotations

import pytest

PAGE = "/spend/"
API = "/api/v1/spend"


@pytest.mark.parametrize(
    "params, field",
    [({"end": "9999-12-31"}, "end"), ({"start": "1999-12-31"}, "start"), ({"start": "0001-01-01"}, "start")],
)
def test_a_date_outside_the_years_a_report_covers_is_a_form_error(researcher_client, params, field):
    response = researcher_client.get(PAGE, params)

    assert response.status_code == 200
    form = response.context["form"]
    assert form.errors[field] == ["Pick a date between 2000-01-01 and 2999-12-31."]
    assert "Pick a date between 2000-01-01 and 2999-12-31." in response.content.decode()


def test_the_last_day_a_report_covers_is_accepted(researcher_client):
    response = researcher_client.get(PAGE, {"start": "2999-12-01", "end": "2999-12-31"})

    assert response.status_code == 200
    assert response.context["form"].is_valid()


@pytest.mark.parametrize(
    "params, field",
    [
        ({"end": "9999-12-31"}, "end"),
        ({"end": "9999-12-31T23:59:59Z"}, "end"),
        ({"start": "0001-01-01T00:00:00Z"}, "start"),
        ({"start": "1999-12-31T23:59:59Z"}, "start"),
        ({"end": "3000-01-01T00:00:00Z"}, "end"),
    ],
)
def test_the_api_refuses_a_time_outside_the_years_a_report_covers(alice, params, field):
    response = alice.get(API, params)

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert error["fields"][field] == ["Must be between 2000-01-01 and 2999-12-31."]


@pytest.mark.parametrize(
    "start, end",
    [("2000-01-01T00:00:00Z", "2000-01-02T00:00:00Z"), ("2999-12-30T00:00:00Z", "2999-12-31T23:59:59Z")],
    ids=["first day", "last day"],
)
def test_the_api_takes_the_first_and_the_last_day(alice, start, end):
    response = alice.get(API, {"start": start, "end": end})

    assert response.status_code == 200, response.content
    assert response.json()["total"] == "0.00"
