"""Text shared by the report and the CLI: durations as a reader wants them."""


def format_seconds(seconds: float) -> str:
    """``12.3 s``, ``4 min 05 s``, ``2 h 10 min``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"
