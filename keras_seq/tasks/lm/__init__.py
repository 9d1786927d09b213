"""Next-token language modelling: config (:mod:`.config`), evaluation, loading and sampling
(:mod:`.evaluation`, no trainer import) and the trainer plug-in (:mod:`.task`)."""
