"""The one exception type the CLI turns into a one-line message and a non-zero exit."""


class MtError(Exception):
    """A problem the user can fix: bad input, a missing file, an impossible setting.

    The message is shown as is, so it must name the file (and line) and say what to do.
    """
