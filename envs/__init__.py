"""Environments: ALFWorld (real alfworld/textworld engine) and the paper's Wikipedia API."""
