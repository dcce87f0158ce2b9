"""The daemon's side of a job: ``night`` (job folders, one render or show from start to the store),
``supervisor`` (runs and restarts the worker process) and ``info`` (the info screen's facts)."""
