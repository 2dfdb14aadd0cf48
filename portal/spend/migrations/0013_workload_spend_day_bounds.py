# Each workload's total keeps its dearest day and its cheapest day between its first and last
# (where it has a row on every day between): bounds that let the workload report leave out the day
# rows of workloads running across a range's edge that cannot be among the largest. Set for the
# totals already kept by the next migration, in a transaction of its own (this one's lock on the
# table is held only to add the columns).

from django.db import migrations

import portal.spend.models


class Migration(migrations.Migration):
    dependencies = [
        ("spend", "0012_workload_spend_shared"),
    ]

    operations = [
        migrations.AddField(
            model_name="workloadspend",
            name="low_day_cost",
            field=portal.spend.models.UnitsField(null=True),
        ),
        migrations.AddField(
            model_name="workloadspend",
            name="peak_day_cost",
            field=portal.spend.models.UnitsField(null=True),
        ),
    ]
