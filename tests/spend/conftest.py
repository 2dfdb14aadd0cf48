import pytest


@pytest.fixture(autouse=True)
def hours_kept_for_five_days(settings):
    """Roll-ups by the hour kept for the last 5 days, not the default 35: a test rolls the days of
    its holds, and 35 days of hours repeat the same hour roll-ups over more days at about a third
    of these tests' time. Older days take the path of days past 35 (blocks of 8 hours). A test
    that needs hours further back sets its own."""
    settings.PORTAL_SPEND_HOUR_DAYS = 5
