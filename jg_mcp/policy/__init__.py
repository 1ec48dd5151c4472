"""The static source policy: what a solution's source may use, an allow-list the harness checks before the candidate
runs. `check.py` is the entry (`static_check`, one visitor over the syntax tree showing each node to the rule objects
of the other modules, one concern each); `open_policy.py` is the open policy's check; `brief.py` is what the agent
is told of it."""
