"""HTTP plumbing shared by the daemon, the remote-render client and the ``frame serve-*`` servers:
requests with an overall deadline (``deadline``), the threaded WSGI server (``server``) and the
failed-login rate limiter (``ratelimit``)."""
