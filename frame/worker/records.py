"""What the daemon and the worker processes agree on (the daemon imports this module, so it stays
standard-library only): the worker's exit codes. The job, choice, events and results join it as
typed records (issue 15, step 8)."""

EXIT_PERMANENT = 3  # a missing part, a bad model: restarting cannot help
EXIT_STOPPED = 143  # SIGTERM: the job resumes from its last checkpoint
