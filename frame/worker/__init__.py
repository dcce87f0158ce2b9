"""The worker processes the daemon supervises: ``python -m frame.worker.render|show|infoscreen
JOB_DIR``. Everything heavy (the numpy engine, the diffusion pipeline, scikit-learn, dithering, the
panel drivers) runs here, never in the daemon, which imports only ``records`` (what the processes
exchange) and ``checks`` (what the settings page re-validates)."""
