"""ddp_profile's version: the wheel's (pyproject.toml reads it from this line) and the companion's, which each run
folder records beside torch's."""
__version__ = "0.1.0"
