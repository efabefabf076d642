# ProbeRun.retry_of: the earlier attempt a run retries (transient failure or lost worker; collectors/FAULTS.md).

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('collectors', '0005_dash_scrape_rollup'),
    ]

    operations = [
        migrations.AddField(
            model_name='proberun',
            name='retry_of',
            field=models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='retried_by', to='collectors.proberun'),
        ),
    ]
