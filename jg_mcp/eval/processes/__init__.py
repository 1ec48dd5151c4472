"""The worker processes seen from the harness: starting and talking to one (`process`), its process tree
(`proctree`), the candidate's sandbox (`isolation`), workers started ahead for the next eval (`spares`) and the
baselines' compile cache (`compile_cache`)."""
