"""`python -m frame` is the same as the `frame` command."""

from frame.cli import main

raise SystemExit(main())
