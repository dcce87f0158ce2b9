"""How long and how much memory a night will take, before it runs: ``frame estimate`` and the night's step
count (``choice``), from op counts (``counting``), scratch sizes and this machine's measured throughput."""
