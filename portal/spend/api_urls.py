from django.urls import path

from portal.spend import api, budget_api

urlpatterns = [
    path("spend", api.SpendView.as_view(), name="api-spend"),
    path("teams/<slug:slug>/budget", budget_api.TeamBudgetView.as_view(), name="api-team-budget"),
]
