from django.urls import path

from portal.spend import exports, statement, target_budget_views, views

urlpatterns = [
    path("spend/", views.spend, name="spend"),
    path("teams/<slug:slug>/budget/", views.team_budget, name="team-budget"),
    path(
        "teams/<slug:slug>/budgets/",
        target_budget_views.team_target_budgets_panel,
        name="team-target-budgets",
    ),
    path("spend/my-budgets/", target_budget_views.my_budgets_panel, name="my-budgets"),
    path("spend/export.<slug:fmt>", exports.spend_download, name="spend-export"),
    path("spend/statement/", statement.statement_pick, name="spend-statement-pick"),
    path("spend/statement/<slug:slug>/<str:month>/", statement.statement_page, name="spend-statement"),
]
