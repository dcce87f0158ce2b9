"""The servers frame runs for other frames on the network: ``frame serve-render`` (``render``: the
pipeline behind the AUTOMATIC1111 API subset) and ``frame serve-model`` (``model``: a model folder over
HTTP with range requests)."""
