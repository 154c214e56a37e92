"""Importers of evaluation data made elsewhere: arena-hard-auto judgments, battle logs, generic
pairwise tables and per-prompt score tables, each read into a validated `Dataset`."""
