"""What runs inside the candidate's process (and the baselines'): the worker that answers the harness's commands
(`worker`, `worker_commands`), its tamper checks (`guard`) and the run-time record of forbidden operators
(`recorder`). Nothing here is believed by the judge without a check from outside; it imports only the wire, the
policy's tables and the core."""
