"""Reports sum many rows with PostgreSQL settings of their own (no JIT, more memory for hashes and
sorts), and give the session its own settings back after, even when the report fails."""

from __future__ import annotations

import pytest
from django.db import connection

from portal.spend.holds import SUMMING_WORK_MEM, summing_settings

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL settings"),
]


def _settings() -> tuple[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('jit'), current_setting('work_mem')")
        return cursor.fetchone()


def test_the_block_sums_with_its_settings_and_the_sessions_come_back_after_a_failure():
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('jit', 'on', false), set_config('work_mem', '3MB', false)")
    with pytest.raises(RuntimeError), summing_settings():
        assert _settings() == ("off", SUMMING_WORK_MEM)
        raise RuntimeError("a report failed")
    assert _settings() == ("on", "3MB")


def test_nested_blocks_keep_the_outer_settings_until_the_outer_block_ends():
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('jit', 'on', false), set_config('work_mem', '3MB', false)")
    with summing_settings():
        with summing_settings():
            pass
        assert _settings() == ("off", SUMMING_WORK_MEM)
    assert _settings() == ("on", "3MB")
