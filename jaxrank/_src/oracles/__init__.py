"""Loss-augmented inference oracles and their sort machinery (pure JAX, no scikit-learn)."""
