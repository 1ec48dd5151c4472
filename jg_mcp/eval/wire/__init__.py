"""What crosses between the harness and its worker processes: the typed messages (`messages`), their framing on a
socket (`channel`) and the shared device buffers both sides map (`buffers`)."""
