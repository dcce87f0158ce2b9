"""Home Assistant through an MQTT broker (``mqtt.host``; docs/home-assistant.md): ``topics`` names every
topic, ``discovery`` the retained entity descriptions Home Assistant finds the frame by, ``link`` the
connection (paho-mqtt: reconnects with backoff, last will ``offline``), ``commands`` what a command
does (always an owner action of ``frame.daemon.actions``), ``state`` what the frame publishes, and
``bridge`` ties them to the running daemon.
"""
