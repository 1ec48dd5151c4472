"""A malformed campaign file is one line that names the field: an unknown key first, with the key it resembles."""

from __future__ import annotations

import pytest

from jg_mcp.campaign.campaign import load_campaign
from jg_mcp.errors import JgError
from tests.support import jg


@pytest.mark.slow
def test_a_misspelt_top_level_key_is_one_line_naming_it_first_with_a_suggestion(tmp_path):
    campaign = tmp_path / "c.yaml"
    campaign.write_text("agentz: [{adapter: scripted}]\ngoals: [axpy]\n")
    done = jg("campaign", campaign, "--out", tmp_path / "runs", "--dry-run", timeout=120)
    assert done.returncode == 1 and done.stdout == "", done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"jg-mcp campaign: {campaign}: field 'agentz' unknown key; did you mean 'agents'?")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "agents: [{adaptr: scripted}]\ngoals: [axpy]\n",
            "field 'agents.0.adaptr' unknown key; did you mean 'adapter'?",
        ),
        (
            "agents: [{adapter: scripted}]\ngoals: [axpy]\nbudget: {wall_clock_minute: 5}\n",
            "field 'budget.wall_clock_minute' unknown key; did you mean 'wall_clock_minutes'?",
        ),
        (
            "agents: [{adapter: scripted}]\ngoals: [axpy]\nseed: [1]\n",
            "field 'seed' unknown key; did you mean 'seeds'?",
        ),
        ("agents: [{adapter: scripted}]\n", "field 'goals' Field required"),
        ("", "must be a YAML mapping of campaign fields"),
        ("agents: [\n", "YAML syntax error"),
    ],
)
def test_each_malformed_campaign_is_one_line_that_names_the_problem(tmp_path, text, expected):
    campaign = tmp_path / "c.yaml"
    campaign.write_text(text)
    with pytest.raises(JgError) as raised:
        load_campaign(campaign)
    message = str(raised.value)
    assert message.startswith(f"{campaign}: ") and expected in message and "\n" not in message, message
