"""Ratings from pairwise comparisons alone: Bradley-Terry / Elo, win rate against a baseline, style control."""
