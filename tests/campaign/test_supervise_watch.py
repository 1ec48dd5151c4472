"""What the runner's watch decides from a run's transcript, without starting an agent."""

from __future__ import annotations

import json
import time

from jg_mcp.campaign import supervise
from jg_mcp.campaign.supervise import Watch


def test_an_agent_is_stopped_only_after_the_budget_refusal_could_reach_it(tmp_path, monkeypatch):
    """The server writes its close event while the refusal that closed the session is still on its way to the
    agent; stopped at once, an agent could die before reading it (its log would not say why it stopped)."""
    monkeypatch.setattr(supervise, "REFUSAL_S", 0.3)
    (tmp_path / "transcripts").mkdir()
    events = [
        {"event": "request", "ts": time.time(), "method": "tools/call"},
        {"event": "close", "reason": "budget spent: 0.1 minutes of wall clock"},
    ]
    (tmp_path / "transcripts" / "run.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    watch = Watch(tmp_path, budget_s=6, startup_s=60, grace_s=10)
    assert watch.reason_to_stop() == ""
    time.sleep(0.4)
    assert watch.reason_to_stop() == "budget spent: 0.1 minutes of wall clock; agent stopped"
