"""The supervisor and its components: the loop (``supervisor``), dispatch, following
generations, headless workers, the stopping ladder, slots, control, the snapshot, resume,
timers and the slow-call runners; ``run`` is where the CLI and the API start a run."""
