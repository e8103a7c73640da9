"""taskgate: the Task State Machine Protocol, executable."""

__version__ = "0.1.0"
