"""Scripted translators for the document tests: what each document type asks of the model, and
answers that make the expected output exact."""

from __future__ import annotations

from mt_cli.documents.aligned import Aligned


class Recorder:
    """Answers each line in capitals, or as scripted (placeholders are digits, so they come back as
    they went), and keeps every batch it was asked."""

    def __init__(self, answers: dict[str, str] | None = None) -> None:
        self.answers = answers or {}
        self.asked: list[list[str]] = []

    def translate_aligned(self, lines, alignment=False) -> list[Aligned]:
        self.asked.append(list(lines))
        return [Aligned(self.answers.get(line, line.upper())) for line in lines]
