"""What an importer hands on: a validated dataset and notes for the user (what was skipped and why)."""

from __future__ import annotations

from dataclasses import dataclass

from eqarena.datasets.records import Dataset


@dataclass(frozen=True)
class Imported:
    dataset: Dataset
    notes: tuple[str, ...] = ()
