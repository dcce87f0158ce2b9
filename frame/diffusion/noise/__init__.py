"""Where a render's random numbers come from (``model.noise``): ``sources`` holds the table and the
choice (``check_noise``, ``make_noise``, ``A1111_RNG``), ``torch_cpu`` and ``philox`` the two foreign
streams, bit-equal to torch's CPU generator and to A1111's "NV" source. docs/seeds.md says which to
pick and why frame's own stays the default."""
