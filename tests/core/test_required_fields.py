"""A form marks the fields it cannot do without: the request form's name says "required"."""

from __future__ import annotations


def test_the_request_form_marks_the_required_name(researcher_client):
    page = researcher_client.get("/sandboxes/new/").content.decode()
    label = page.split('<label for="id_name">')[1].split("</label>")[0]
    assert "required" in label
    project = page.split('<label for="id_project">')[1].split("</label>")[0]
    assert "required" not in project


def test_the_sign_in_form_has_no_marks(client):
    assert "(required)" not in client.get("/login/").content.decode()
