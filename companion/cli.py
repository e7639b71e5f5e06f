"""`hearth`: the companion's command line (placeholder replaced below)."""
