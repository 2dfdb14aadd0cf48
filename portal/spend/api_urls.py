from django.urls import path

from portal.spend import api, budget_api, daily_api, target_budget_api

urlpatterns = [
    path("spend", api.SpendView.as_view(), name="api-spend"),
    path("spend/daily", daily_api.SpendDailyView.as_view(), name="api-spend-daily"),
    path("teams/<slug:slug>/budget", budget_api.TeamBudgetView.as_view(), name="api-team-budget"),
    path(
        "teams/<slug:slug>/budgets", target_budget_api.TargetBudgetListView.as_view(), name="api-team-budgets"
    ),
    path(
        "teams/<slug:slug>/budgets/<str:kind>/<str:target>",
        target_budget_api.TargetBudgetView.as_view(),
        name="api-team-target-budget",
    ),
    path("teams/<slug:slug>/statement", api.TeamStatementView.as_view(), name="api-team-statement"),
]
