"""The frame's physical buttons: ``dispatch`` turns GPIO presses into the daemon's callbacks (like,
dislike, next, info); ``gpiod_pins`` is gpiozero's pin factory over libgpiod."""
