"""Spend jobs: keeping the roll-ups current. Each calls one service and returns."""

from __future__ import annotations

from celery import shared_task

from portal.spend.services import spend_rollup_due


@shared_task(name="spend.rollup_due", ignore_result=True)
def rollup_due() -> None:
    """Mark changed periods stale, roll the hours and days that have closed, sum full months."""
    spend_rollup_due()
