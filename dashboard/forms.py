"""The server form for staff. Validation is the model's own (http/https URL, probe plan bounds in
collectors/plans.py, interval minimums), so the admin and this form cannot disagree."""

from __future__ import annotations

import json
from typing import Any

from django import forms

from collectors.models import Server


class ServerForm(forms.ModelForm):
    api_key = forms.CharField(
        required=False, widget=forms.PasswordInput(render_value=False),
        help_text="Sent as a bearer token. Leave blank to keep the current key.",
    )

    class Meta:
        model = Server
        fields = ["name", "base_url", "kind", "api_key", "probe_plan", "probe_interval_s", "scrape_interval_s",
                  "nonspec_decode_tps", "enabled"]
        widgets = {"probe_plan": forms.Textarea(attrs={"rows": 6, "cols": 60})}
        help_texts = {"probe_plan": 'JSON, e.g. {"contexts": [64, 1024, 3072], "outputs": [200, 600], "n1": 64, '
                                    '"n2": 320, "repeats": 3}. {} means the defaults.'}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The key is never sent back to the browser; blank on edit keeps the stored one.
        self.fields["probe_plan"].widget.attrs["spellcheck"] = "false"
        if self.instance.pk and not self.is_bound:
            self.initial["probe_plan"] = json.dumps(self.instance.probe_plan, indent=1)

    def clean_api_key(self) -> str:
        key = self.cleaned_data.get("api_key") or ""
        return key or (self.instance.api_key if self.instance.pk else "")
